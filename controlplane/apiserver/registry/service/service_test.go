package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// TestFieldsSelectHeadlessAndType checks the selectable fields against the selectors kube-proxy
// (spec.clusterIP!=None) and kubectl (spec.type=NodePort) send.
func TestFieldsSelectHeadlessAndType(t *testing.T) {
	attrs := store.AttrFunc(true, Fields)
	svc := func(name string, typ corev1.ServiceType, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ip}}
	}
	svcs := []*corev1.Service{svc("headless", corev1.ServiceTypeClusterIP, corev1.ClusterIPNone),
		svc("cip", corev1.ServiceTypeClusterIP, "10.96.0.10"), svc("np", corev1.ServiceTypeNodePort, "10.96.0.11"),
		svc("ext", corev1.ServiceTypeExternalName, "")}
	for sel, want := range map[string]string{
		"spec.clusterIP!=None":                         "cip,np,ext",
		"spec.type=NodePort":                           "np",
		"spec.clusterIP=10.96.0.10":                    "cip",
		"metadata.namespace=ns,spec.type=LoadBalancer": "",
		"spec.type=ExternalName,metadata.name=ext":     "ext",
	} {
		s, err := fields.ParseSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, o := range svcs {
			_, fs, err := attrs(o)
			if err != nil {
				t.Fatal(err)
			}
			if s.Matches(fs) {
				if got != "" {
					got += ","
				}
				got += o.Name
			}
		}
		if got != want {
			t.Errorf("%s selects %q, want %q", sel, got, want)
		}
	}
}
