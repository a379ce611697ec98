// Package scheme is the API server's runtime.Scheme: the k8s.io/api types of the groups nodekit serves (and
// k8s.io/metrics' metrics.k8s.io/v1beta1).
//
// nodekit has no internal API types. Each served external type is registered a second time under its
// group's internal version (runtime.APIVersionInternal), so the generic REST handlers, which decode to the
// internal "hub" version, convert by only re-setting the kind. The one kind served in two versions with
// different Go types, autoscaling/v1 and v2 HorizontalPodAutoscalers, has v2's type as its hub and
// the conversions of package conversion between them. Storage encodes back to the external version
// as JSON, which is what `etcdctl get /registry/...` prints.
package scheme

import (
	"fmt"
	"reflect"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	apiconversion "github.com/nodekit/nodekit/controlplane/apiserver/conversion"
	"github.com/nodekit/nodekit/controlplane/apiserver/defaults"
)

var (
	// Scheme holds every served type, its defaulting functions and its field label conversions.
	Scheme = runtime.NewScheme()
	// Codecs are the serializers (JSON, YAML, protobuf) over Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
	// ParameterCodec decodes query parameters (ListOptions, DeleteOptions...).
	ParameterCodec = runtime.NewParameterCodec(Scheme)
	// GroupVersions are the served external versions, one per group but autoscaling (v2, the storage
	// and preferred version of HorizontalPodAutoscalers, then v1 for them and the Scale subresource
	// kind); storage encodes to the first version of an object's group.
	GroupVersions = schema.GroupVersions{
		corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion, coordinationv1.SchemeGroupVersion,
		discoveryv1.SchemeGroupVersion, autoscalingv2.SchemeGroupVersion, autoscalingv1.SchemeGroupVersion, policyv1.SchemeGroupVersion,
		authenticationv1.SchemeGroupVersion, certificatesv1.SchemeGroupVersion, networkingv1.SchemeGroupVersion,
		eventsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion, rbacv1.SchemeGroupVersion, authorizationv1.SchemeGroupVersion,
		admissionregistrationv1.SchemeGroupVersion, storagev1.SchemeGroupVersion, nodev1.SchemeGroupVersion, svmv1.SchemeGroupVersion,
		schedulingv1.SchemeGroupVersion, flowcontrolv1.SchemeGroupVersion, metricsv1beta1.SchemeGroupVersion,
	}
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, coordinationv1.AddToScheme,
		discoveryv1.AddToScheme, autoscalingv2.AddToScheme, autoscalingv1.AddToScheme, policyv1.AddToScheme,
		authenticationv1.AddToScheme, certificatesv1.AddToScheme, networkingv1.AddToScheme, eventsv1.AddToScheme,
		batchv1.AddToScheme, rbacv1.AddToScheme, authorizationv1.AddToScheme, admissionregistrationv1.AddToScheme,
		storagev1.AddToScheme, nodev1.AddToScheme, svmv1.AddToScheme, schedulingv1.AddToScheme, flowcontrolv1.AddToScheme,
		metricsv1beta1.AddToScheme, metainternalversion.AddToScheme,
	} {
		utilruntime.Must(add(Scheme))
	}
	for _, gv := range GroupVersions {
		registerHub(gv)
	}
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	utilruntime.Must(addFieldLabels(Scheme))
	utilruntime.Must(addParamConversions(Scheme))
	utilruntime.Must(apiconversion.RegisterAutoscaling(Scheme))
	defaults.Register(Scheme)
}

// registerHub registers gv's own (non-meta) kinds again under gv's internal version. A kind already
// there from an earlier version of the group (autoscaling/v1's HorizontalPodAutoscaler after v2's) keeps
// that version's type as its hub: gv serves it through the conversions registered between the two
// types (package conversion).
func registerHub(gv schema.GroupVersion) {
	hub := schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
	for kind, t := range Scheme.KnownTypes(gv) {
		if strings.HasPrefix(t.PkgPath(), "k8s.io/apimachinery/") || Scheme.Recognizes(hub.WithKind(kind)) {
			continue
		}
		obj := reflect.New(t).Interface().(runtime.Object)
		Scheme.AddKnownTypeWithName(hub.WithKind(kind), obj)
		utilruntime.Must(Scheme.AddConversionFunc(obj, obj, copyObject))
	}
}

// copyObject is the conversion between a kind's hub and external versions, which share one Go type: a
// deep copy. Admission (webhooks, ValidatingAdmissionPolicy) converts the hub object to the version a
// webhook or policy asks for through it, and a mutating webhook's patched object back.
func copyObject(in, out any, _ conversion.Scope) error {
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(in.(runtime.Object).DeepCopyObject()).Elem())
	return nil
}

// fieldLabels lists the field selectors each kind supports beyond metadata.name and metadata.namespace,
// as kube-apiserver does (pkg/apis/*/v1/conversion.go).
var fieldLabels = map[schema.GroupVersionKind][]string{
	corev1.SchemeGroupVersion.WithKind("Pod"): {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
		"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
	corev1.SchemeGroupVersion.WithKind("Service"):               {"spec.clusterIP", "spec.type"},
	corev1.SchemeGroupVersion.WithKind("Node"):                  {"spec.unschedulable"},
	corev1.SchemeGroupVersion.WithKind("Namespace"):             {"status.phase"},
	corev1.SchemeGroupVersion.WithKind("Secret"):                {"type"},
	corev1.SchemeGroupVersion.WithKind("ReplicationController"): {"status.replicas"},
	corev1.SchemeGroupVersion.WithKind("Event"): {"involvedObject.kind", "involvedObject.namespace",
		"involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
		"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
	appsv1.SchemeGroupVersion.WithKind("ReplicaSet"):                        {"status.replicas"},
	certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"): {"spec.signerName"},
}

// eventsV1FieldLabels maps the field selectors of events.k8s.io/v1 Events to the core/v1 Event fields
// their shared storage selects on, as kube-apiserver does (pkg/apis/events/v1/conversion.go):
// regarding.* is involvedObject.*, reportingController is reportingComponent.
var eventsV1FieldLabels = map[string]string{
	"metadata.name":             "metadata.name",
	"metadata.namespace":        "metadata.namespace",
	"reason":                    "reason",
	"type":                      "type",
	"reportingController":       "reportingComponent",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
}

func addFieldLabels(s *runtime.Scheme) error {
	if err := s.AddFieldLabelConversionFunc(eventsv1.SchemeGroupVersion.WithKind("Event"),
		func(label, value string) (string, string, error) {
			if mapped, ok := eventsV1FieldLabels[label]; ok {
				return mapped, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s (kind Event)", label)
		}); err != nil {
		return err
	}
	for gvk, labels := range fieldLabels {
		allowed := append([]string{"metadata.name", "metadata.namespace"}, labels...)
		if err := s.AddFieldLabelConversionFunc(gvk, func(label, value string) (string, string, error) {
			for _, a := range allowed {
				if a == label {
					return label, value, nil
				}
			}
			return "", "", fmt.Errorf("field label not supported: %s (kind %s)", label, gvk.Kind)
		}); err != nil {
			return err
		}
	}
	return nil
}
