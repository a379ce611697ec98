// Package servicecidr is the networking.k8s.io/v1 servicecidrs resource (cluster-scoped, with /status).
//
// kube-apiserver keeps a default ServiceCIDR named "kubernetes" whose spec.cidrs is its
// --service-cluster-ip-range and whose status carries a Ready=True condition; service proxies such as
// kube-proxy list ServiceCIDRs to tell ClusterIPs from other traffic. nodekit allocates ClusterIPs only from
// its configured range (package allocator), so it serves that default object, keeps it in place (EnsureDefault)
// and refuses every other ServiceCIDR, a change of the default's spec and its deletion: accepting objects
// that have no effect on allocation would misreport what the cluster does.
package servicecidr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// DefaultName is the name of the default ServiceCIDR, as kube-apiserver's.
const DefaultName = "kubernetes"

var resource = networkingv1.Resource("servicecidrs")

// REST is the servicecidrs endpoint: the generic store with deletion refused.
type REST struct {
	*store.REST
	cidr string
}

// Delete refuses with 403 Forbidden: the default ServiceCIDR is the cluster's only ClusterIP range.
func (r *REST) Delete(ctx context.Context, name string, _ rest.ValidateObjectFunc, _ *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if _, err := r.Get(ctx, name, &metav1.GetOptions{}); err != nil {
		return nil, false, err
	}
	return nil, false, apierrors.NewForbidden(resource, name, r.refusal("deleting it"))
}

// DeleteCollection refuses with 403 Forbidden, as Delete.
func (r *REST) DeleteCollection(context.Context, rest.ValidateObjectFunc, *metav1.DeleteOptions, *metainternalversion.ListOptions) (runtime.Object, error) {
	return nil, apierrors.NewForbidden(resource, "", r.refusal("deleting it"))
}

func (r *REST) refusal(what string) error {
	return errors.New(reason(r.cidr, what))
}

// reason explains why a ServiceCIDR change is refused.
func reason(cidr, what string) string {
	return fmt.Sprintf("nodekit allocates ClusterIPs only from its --service-cluster-ip-range %s, held by the default ServiceCIDR %q; %s is not supported", cidr, DefaultName, what)
}

// NewStorage returns "servicecidrs" and "servicecidrs/status" for the service CIDR cidr (for example
// "10.96.0.0/12"). Creating any ServiceCIDR other than DefaultName with spec.cidrs [cidr] answers 422
// Invalid naming the reason, as does changing the default's spec; deleting answers 403 Forbidden. Status
// updates are validated as metav1 Conditions.
func NewStorage(getter generic.RESTOptionsGetter, cidr string) (map[string]rest.Storage, *REST, *store.StatusREST, error) {
	s := store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList { return validateCreate(o.(*networkingv1.ServiceCIDR), cidr) })
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		n, p := o.(*networkingv1.ServiceCIDR), old.(*networkingv1.ServiceCIDR)
		if !slices.Equal(n.Spec.CIDRs, p.Spec.CIDRs) {
			return field.ErrorList{field.Forbidden(field.NewPath("spec", "cidrs"), reason(cidr, "changing the default ServiceCIDR's cidrs"))}
		}
		return nil
	}
	main, status, err := store.New(getter, store.Spec{
		Resource:       resource,
		Singular:       "servicecidr",
		StatusMetadata: store.StatusResetsObjectMeta,
		NewFunc:        func() runtime.Object { return &networkingv1.ServiceCIDR{} },
		NewList:        func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		Strategy:       s,
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return metav1validation.ValidateConditions(o.(*networkingv1.ServiceCIDR).Status.Conditions, field.NewPath("status", "conditions"))
		},
	})
	if err != nil {
		return nil, nil, nil, err
	}
	r := &REST{REST: main, cidr: cidr}
	return map[string]rest.Storage{"servicecidrs": r, "servicecidrs/status": status}, r, status, nil
}

// validateCreate admits only the default ServiceCIDR over the configured range.
func validateCreate(sc *networkingv1.ServiceCIDR, cidr string) field.ErrorList {
	if sc.Name != DefaultName {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), reason(cidr, "creating another ServiceCIDR"))}
	}
	if !slices.Equal(sc.Spec.CIDRs, []string{cidr}) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "cidrs"), sc.Spec.CIDRs, reason(cidr, "any other range"))}
	}
	return nil
}

// EnsureDefault creates the default ServiceCIDR over cidr when it is missing, replaces it when it holds
// another range (the server was restarted with a new --service-cluster-ip-range), and sets its Ready
// condition to True, as kube-apiserver's default ServiceCIDR controller does. It goes to storage directly
// (no authorization or admission), so it also repairs objects written straight to etcd.
func EnsureDefault(ctx context.Context, main *REST, status *store.StatusREST) error {
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	obj, err := main.Get(ctx, DefaultName, &metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		obj, err = create(ctx, main)
	case err == nil && !slices.Equal(obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, []string{main.cidr}):
		slog.Info("servicecidr: replacing the default ServiceCIDR", "servicecidr", DefaultName, "old", obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, "cidr", main.cidr)
		if _, _, err = main.REST.Delete(ctx, DefaultName, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
			obj, err = create(ctx, main)
		}
	}
	if err != nil {
		return fmt.Errorf("servicecidr %s: %w", DefaultName, err)
	}
	sc := obj.(*networkingv1.ServiceCIDR).DeepCopy()
	if meta.IsStatusConditionTrue(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		return nil
	}
	meta.SetStatusCondition(&sc.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady,
		Status: metav1.ConditionTrue, Reason: "ServiceCIDRReady", Message: "Kubernetes service CIDR is ready",
		ObservedGeneration: sc.Generation})
	if _, _, err := status.Update(ctx, DefaultName, rest.DefaultUpdatedObjectInfo(sc), rest.ValidateAllObjectFunc,
		rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("servicecidr %s status: %w", DefaultName, err)
	}
	slog.Info("servicecidr: default ready", "servicecidr", DefaultName, "cidr", main.cidr)
	return nil
}

func create(ctx context.Context, main *REST) (runtime.Object, error) {
	return main.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: DefaultName},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{main.cidr}}}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
}
