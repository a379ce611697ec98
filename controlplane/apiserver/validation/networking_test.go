package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// TestIngressBadInput: each bad Ingress is refused with a cause on the field at fault; the base passes.
func TestIngressBadInput(t *testing.T) {
	mk := func(edit func(s *networkingv1.IngressSpec)) *networkingv1.Ingress {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "i"}, Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{Host: "*.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/api", PathType: ptr.To(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}},
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}, SecretName: "tls"}}}}
		if edit != nil {
			edit(&ing.Spec)
		}
		return ing
	}
	if errs := Ingress(mk(nil), nil); len(errs) != 0 {
		t.Fatalf("valid Ingress: %v", errs)
	}
	path := func(s *networkingv1.IngressSpec) *networkingv1.HTTPIngressPath { return &s.Rules[0].HTTP.Paths[0] }
	for _, tc := range []struct {
		name, field string
		typ         field.ErrorType
		edit        func(s *networkingv1.IngressSpec)
	}{
		{"no rules nor backend", "spec", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { s.Rules = nil }},
		{"IP host", "spec.rules[0].host", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { s.Rules[0].Host = "10.0.0.1" }},
		{"no pathType", "spec.rules[0].http.paths[0].pathType", field.ErrorTypeRequired, func(s *networkingv1.IngressSpec) { path(s).PathType = nil }},
		{"bad pathType", "spec.rules[0].http.paths[0].pathType", field.ErrorTypeNotSupported, func(s *networkingv1.IngressSpec) {
			path(s).PathType = ptr.To(networkingv1.PathType("Regex"))
		}},
		{"relative path", "spec.rules[0].http.paths[0].path", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { path(s).Path = "api" }},
		{"dot segment", "spec.rules[0].http.paths[0].path", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { path(s).Path = "/a/../b" }},
		{"no paths", "spec.rules[0].http.paths", field.ErrorTypeRequired, func(s *networkingv1.IngressSpec) { s.Rules[0].HTTP.Paths = nil }},
		{"both backends", "spec.rules[0].http.paths[0].backend", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) {
			path(s).Backend.Resource = &corev1.TypedLocalObjectReference{Kind: "K", Name: "n"}
		}},
		{"no backend", "spec.rules[0].http.paths[0].backend", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { path(s).Backend.Service = nil }},
		{"port name and number", "spec.rules[0].http.paths[0].backend", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) {
			path(s).Backend.Service.Port.Number = 80
		}},
		{"no port", "spec.rules[0].http.paths[0].backend", field.ErrorTypeRequired, func(s *networkingv1.IngressSpec) { path(s).Backend.Service.Port.Name = "" }},
		{"bad service name", "spec.rules[0].http.paths[0].backend.service.name", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) {
			path(s).Backend.Service.Name = "Web"
		}},
		{"resource without kind", "spec.defaultBackend.resource.kind", field.ErrorTypeRequired, func(s *networkingv1.IngressSpec) {
			s.DefaultBackend = &networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Name: "n"}}
		}},
		{"bad tls host", "spec.tls[0].hosts[0]", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { s.TLS[0].Hosts[0] = "a_b" }},
		{"bad secret name", "spec.tls[0].secretName", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { s.TLS[0].SecretName = "Tls" }},
		{"bad class name", "spec.ingressClassName", field.ErrorTypeInvalid, func(s *networkingv1.IngressSpec) { s.IngressClassName = ptr.To("A") }},
	} {
		if errs := Ingress(mk(tc.edit), nil); !hasCause(errs, tc.field, tc.typ) {
			t.Errorf("%s: want a %s cause on %s, got %v", tc.name, tc.typ, tc.field, errs)
		}
	}
	ing := mk(func(s *networkingv1.IngressSpec) { s.IngressClassName = ptr.To("a") })
	ing.Annotations = map[string]string{AnnotationIngressClass: "b"}
	if errs := Ingress(ing, nil); !hasCause(errs, "annotations.kubernetes.io/ingress.class", field.ErrorTypeInvalid) {
		t.Errorf("class annotation and ingressClassName differ on create: %v", errs)
	}
	if errs := Ingress(ing, ing); len(errs) != 0 {
		t.Errorf("class annotation and ingressClassName differ on update (allowed, as upstream): %v", errs)
	}
}

// TestIngressClassBadInput covers the controller and the parameters' scope rules.
func TestIngressClassBadInput(t *testing.T) {
	mk := func(controller string, p *networkingv1.IngressClassParametersReference) *networkingv1.IngressClass {
		return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: networkingv1.IngressClassSpec{Controller: controller, Parameters: p}}
	}
	ns := networkingv1.IngressClassParametersReferenceScopeNamespace
	cl := networkingv1.IngressClassParametersReferenceScopeCluster
	for _, tc := range []struct {
		name, field string
		typ         field.ErrorType
		ic, old     *networkingv1.IngressClass
	}{
		{"controller without domain", "spec.controller", field.ErrorTypeInvalid, mk("nginx", nil), nil},
		{"controller changed", "spec.controller", field.ErrorTypeInvalid, mk("example.com/a", nil), mk("example.com/b", nil)},
		{"no scope", "spec.parameters.scope", field.ErrorTypeRequired, mk("example.com/a", &networkingv1.IngressClassParametersReference{Kind: "K", Name: "n"}), nil},
		{"namespace scope without namespace", "spec.parameters.namespace", field.ErrorTypeRequired,
			mk("example.com/a", &networkingv1.IngressClassParametersReference{Kind: "K", Name: "n", Scope: &ns}), nil},
		{"cluster scope with namespace", "spec.parameters.namespace", field.ErrorTypeForbidden,
			mk("example.com/a", &networkingv1.IngressClassParametersReference{Kind: "K", Name: "n", Scope: &cl, Namespace: ptr.To("x")}), nil},
		{"bad scope", "spec.parameters.scope", field.ErrorTypeNotSupported,
			mk("example.com/a", &networkingv1.IngressClassParametersReference{Kind: "K", Name: "n", Scope: ptr.To("World")}), nil},
		{"kind with slash", "spec.parameters.kind", field.ErrorTypeInvalid,
			mk("example.com/a", &networkingv1.IngressClassParametersReference{Kind: "a/b", Name: "n", Scope: &cl}), nil},
	} {
		if errs := IngressClass(tc.ic, tc.old); !hasCause(errs, tc.field, tc.typ) {
			t.Errorf("%s: want a %s cause on %s, got %v", tc.name, tc.typ, tc.field, errs)
		}
	}
	if errs := IngressClass(mk("example.com/a", &networkingv1.IngressClassParametersReference{Kind: "K", Name: "n", Scope: &ns, Namespace: ptr.To("x")}), nil); len(errs) != 0 {
		t.Errorf("valid IngressClass: %v", errs)
	}
}

// TestNetworkPolicyBadInput covers ports, peers, ipBlocks and policyTypes; a CIDR the stored policy
// already holds is accepted on update even when no longer valid, as upstream.
func TestNetworkPolicyBadInput(t *testing.T) {
	port := func(p intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Port: &p, EndPort: end}
	}
	mk := func(ports []networkingv1.NetworkPolicyPort, peer networkingv1.NetworkPolicyPeer, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: types,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports, From: []networkingv1.NetworkPolicyPeer{peer}}}}}
	}
	sel := &metav1.LabelSelector{}
	ok := networkingv1.NetworkPolicyPeer{PodSelector: sel}
	for _, tc := range []struct {
		name, field string
		typ         field.ErrorType
		np          *networkingv1.NetworkPolicy
	}{
		{"port 0", "spec.ingress[0].ports[0].port", field.ErrorTypeInvalid, mk([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(0), nil)}, ok)},
		{"endPort below port", "spec.ingress[0].ports[0].endPort", field.ErrorTypeInvalid, mk([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(90), ptr.To[int32](80))}, ok)},
		{"endPort with a named port", "spec.ingress[0].ports[0].endPort", field.ErrorTypeInvalid, mk([]networkingv1.NetworkPolicyPort{port(intstr.FromString("http"), ptr.To[int32](80))}, ok)},
		{"endPort without port", "spec.ingress[0].ports[0].endPort", field.ErrorTypeInvalid, mk([]networkingv1.NetworkPolicyPort{{EndPort: ptr.To[int32](80)}}, ok)},
		{"bad protocol", "spec.ingress[0].ports[0].protocol", field.ErrorTypeNotSupported, mk([]networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.Protocol("ICMP"))}}, ok)},
		{"empty peer", "spec.ingress[0].from[0]", field.ErrorTypeRequired, mk(nil, networkingv1.NetworkPolicyPeer{})},
		{"ipBlock and selector", "spec.ingress[0].from[0]", field.ErrorTypeForbidden, mk(nil, networkingv1.NetworkPolicyPeer{PodSelector: sel, IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}})},
		{"no cidr", "spec.ingress[0].from[0].ipBlock.cidr", field.ErrorTypeRequired, mk(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{}})},
		{"bad cidr", "spec.ingress[0].from[0].ipBlock.cidr", field.ErrorTypeInvalid, mk(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1/8"}})},
		{"except not inside", "spec.ingress[0].from[0].ipBlock.except[0]", field.ErrorTypeInvalid,
			mk(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.0.0/16"}}})},
		{"bad policy type", "spec.policyTypes[0]", field.ErrorTypeNotSupported, mk(nil, ok, "Both")},
		{"three policy types", "spec.policyTypes", field.ErrorTypeInvalid, mk(nil, ok, "Ingress", "Egress", "Ingress")},
	} {
		if errs := NetworkPolicy(tc.np, nil); !hasCause(errs, tc.field, tc.typ) {
			t.Errorf("%s: want a %s cause on %s, got %v", tc.name, tc.typ, tc.field, errs)
		}
	}
	old := mk(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1/8"}})
	if errs := NetworkPolicy(old.DeepCopy(), old); len(errs) != 0 {
		t.Errorf("update keeping a stored non-canonical CIDR: %v", errs)
	}
	if errs := NetworkPolicy(mk([]networkingv1.NetworkPolicyPort{port(intstr.FromInt32(80), ptr.To[int32](90))}, networkingv1.NetworkPolicyPeer{
		IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.1.0/24"}}}, "Ingress"), nil); len(errs) != 0 {
		t.Errorf("valid NetworkPolicy: %v", errs)
	}
}

// TestRuntimeClassBadInput covers handler, overhead and scheduling.
func TestRuntimeClassBadInput(t *testing.T) {
	mk := func(edit func(rc *nodev1.RuntimeClass)) *nodev1.RuntimeClass {
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Handler: "runc"}
		edit(rc)
		return rc
	}
	tol := corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name, field string
		typ         field.ErrorType
		rc          *nodev1.RuntimeClass
		old         *nodev1.RuntimeClass
	}{
		{"no handler", "handler", field.ErrorTypeRequired, mk(func(rc *nodev1.RuntimeClass) { rc.Handler = "" }), nil},
		{"handler not a label", "handler", field.ErrorTypeInvalid, mk(func(rc *nodev1.RuntimeClass) { rc.Handler = "run.c" }), nil},
		{"handler changed", "handler", field.ErrorTypeInvalid, mk(func(rc *nodev1.RuntimeClass) { rc.Handler = "kata" }), mk(func(*nodev1.RuntimeClass) {})},
		{"negative overhead", "overhead.limits[cpu]", field.ErrorTypeInvalid, mk(func(rc *nodev1.RuntimeClass) {
			rc.Overhead = &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}}
		}), nil},
		{"bad node selector", "scheduling.nodeSelector", field.ErrorTypeInvalid, mk(func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = &nodev1.Scheduling{NodeSelector: map[string]string{"a": "-x-"}}
		}), nil},
		{"duplicate toleration", "scheduling.tolerations[1]", field.ErrorTypeDuplicate, mk(func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = &nodev1.Scheduling{Tolerations: []corev1.Toleration{tol, tol}}
		}), nil},
		{"toleration without key nor Exists", "scheduling.tolerations[0].operator", field.ErrorTypeInvalid, mk(func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = &nodev1.Scheduling{Tolerations: []corev1.Toleration{{Value: "v"}}}
		}), nil},
		{"tolerationSeconds without NoExecute", "scheduling.tolerations[0].effect", field.ErrorTypeInvalid, mk(func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = &nodev1.Scheduling{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](1)}}}
		}), nil},
		{"bad effect", "scheduling.tolerations[0].effect", field.ErrorTypeNotSupported, mk(func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = &nodev1.Scheduling{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Never"}}}
		}), nil},
	} {
		if errs := RuntimeClass(tc.rc, tc.old); !hasCause(errs, tc.field, tc.typ) {
			t.Errorf("%s: want a %s cause on %s, got %v", tc.name, tc.typ, tc.field, errs)
		}
	}
}
