// Package networking serves networking.k8s.io/v1 ingresses (with /status), ingressclasses (cluster-scoped)
// and networkpolicies, with kube-apiserver's validation (validation.Ingress, IngressClass, NetworkPolicy)
// and defaults (package defaults). These objects are stored for the controllers that act on them: nodekit
// bundles no Ingress controller, and nodekit-cni does not enforce NetworkPolicies (docs/networking-apis.md).
// The DefaultIngressClass admission plugin (package admission) fills spec.ingressClassName on create.
package networking

import (
	"context"
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns "ingresses", "ingresses/status", "ingressclasses" and "networkpolicies".
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	ing := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		return validation.Ingress(o.(*networkingv1.Ingress), nil)
	})
	ing.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.Ingress(o.(*networkingv1.Ingress), old.(*networkingv1.Ingress))
	}
	ingresses, ingressStatus, err := store.New(getter, store.Spec{
		Resource: networkingv1.Resource("ingresses"), Singular: "ingress", ShortNames: []string{"ing"},
		NewFunc:  func() runtime.Object { return &networkingv1.Ingress{} },
		NewList:  func() runtime.Object { return &networkingv1.IngressList{} },
		Strategy: ing,
		StatusValidate: func(o, old runtime.Object) field.ErrorList {
			return validation.IngressStatus(o.(*networkingv1.Ingress), old.(*networkingv1.Ingress))
		},
		Table: ingressTable,
	})
	if err != nil {
		return nil, err
	}
	ic := store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
		return validation.IngressClass(o.(*networkingv1.IngressClass), nil)
	})
	ic.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.IngressClass(o.(*networkingv1.IngressClass), old.(*networkingv1.IngressClass))
	}
	classes, _, err := store.New(getter, store.Spec{
		Resource: networkingv1.Resource("ingressclasses"), Singular: "ingressclass",
		NewFunc:  func() runtime.Object { return &networkingv1.IngressClass{} },
		NewList:  func() runtime.Object { return &networkingv1.IngressClassList{} },
		Strategy: ic,
		Table:    classTable,
	})
	if err != nil {
		return nil, err
	}
	np := store.NewStrategy(true, false, func(o runtime.Object) field.ErrorList {
		return validation.NetworkPolicy(o.(*networkingv1.NetworkPolicy), nil)
	})
	np.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.NetworkPolicy(o.(*networkingv1.NetworkPolicy), old.(*networkingv1.NetworkPolicy))
	}
	// a NetworkPolicy has no status in use, but its generation still follows spec changes, as upstream's
	np.PrepareCreateFn = func(_ context.Context, o runtime.Object) { o.(*networkingv1.NetworkPolicy).Generation = 1 }
	np.PrepareUpdateFn = func(_ context.Context, o, old runtime.Object) {
		n, p := o.(*networkingv1.NetworkPolicy), old.(*networkingv1.NetworkPolicy)
		n.Generation = p.Generation
		if !apiequality.Semantic.DeepEqual(n.Spec, p.Spec) {
			n.Generation++
		}
	}
	policies, _, err := store.New(getter, store.Spec{
		Resource: networkingv1.Resource("networkpolicies"), Singular: "networkpolicy", ShortNames: []string{"netpol"},
		NewFunc:  func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		NewList:  func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		Strategy: np,
		Table:    policyTable,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"ingresses": ingresses, "ingresses/status": ingressStatus,
		"ingressclasses": classes, "networkpolicies": policies}, nil
}

var ingressTable = store.Table{
	Columns: []metav1.TableColumnDefinition{store.Column("Class", "spec.ingressClassName, or <none>"),
		store.Column("Hosts", "the rules' hosts"), store.Column("Address", "status.loadBalancer.ingress"),
		store.Column("Ports", "80, and 443 with TLS")},
	Cells: func(o runtime.Object) []any {
		ing := o.(*networkingv1.Ingress)
		class := "<none>"
		if ing.Spec.IngressClassName != nil {
			class = *ing.Spec.IngressClassName
		}
		var hosts []string
		for _, r := range ing.Spec.Rules {
			if r.Host != "" {
				hosts = append(hosts, r.Host)
			}
		}
		if len(hosts) == 0 {
			hosts = []string{"*"}
		}
		var addrs []string
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			if lb.IP != "" {
				addrs = append(addrs, lb.IP)
			} else if lb.Hostname != "" {
				addrs = append(addrs, lb.Hostname)
			}
		}
		ports := "80"
		if len(ing.Spec.TLS) != 0 {
			ports = "80, 443"
		}
		return []any{class, strings.Join(hosts, ","), strings.Join(addrs, ","), ports}
	},
}

var classTable = store.Table{
	Columns: []metav1.TableColumnDefinition{store.Column("Controller", "spec.controller"), store.Column("Parameters", "spec.parameters")},
	Cells: func(o runtime.Object) []any {
		ic := o.(*networkingv1.IngressClass)
		params := "<none>"
		if p := ic.Spec.Parameters; p != nil {
			group := "k8s.io"
			if p.APIGroup != nil {
				group = *p.APIGroup
			}
			params = fmt.Sprintf("%s/%s", strings.ToLower(p.Kind)+"."+group, p.Name)
		}
		return []any{ic.Spec.Controller, params}
	},
}

var policyTable = store.Table{
	Columns: []metav1.TableColumnDefinition{store.Column("Pod-Selector", "spec.podSelector")},
	Cells: func(o runtime.Object) []any {
		sel, err := metav1.LabelSelectorAsSelector(&o.(*networkingv1.NetworkPolicy).Spec.PodSelector)
		if err != nil || sel.Empty() {
			return []any{"<none>"}
		}
		parts := strings.Split(sel.String(), ",")
		sort.Strings(parts)
		return []any{strings.Join(parts, ",")}
	},
}
