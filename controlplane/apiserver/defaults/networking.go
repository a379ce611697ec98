package defaults

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// registerNetworking defaults NetworkPolicies and IngressClasses as kube-apiserver does
// (pkg/apis/networking/v1/defaults.go).
func registerNetworking(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&networkingv1.NetworkPolicy{}, func(o any) { NetworkPolicy(o.(*networkingv1.NetworkPolicy)) })
	s.AddTypeDefaultingFunc(&networkingv1.IngressClass{}, func(o any) {
		if p := o.(*networkingv1.IngressClass).Spec.Parameters; p != nil && p.Scope == nil {
			p.Scope = ptr.To(networkingv1.IngressClassParametersReferenceScopeCluster)
		}
	})
}

// NetworkPolicy defaults every rule port's protocol to TCP and empty policyTypes to [Ingress], plus
// Egress when the policy has egress rules.
func NetworkPolicy(np *networkingv1.NetworkPolicy) {
	ports := func(ps []networkingv1.NetworkPolicyPort) {
		for i := range ps {
			if ps[i].Protocol == nil {
				ps[i].Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	}
	for i := range np.Spec.Ingress {
		ports(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		ports(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) != 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}
