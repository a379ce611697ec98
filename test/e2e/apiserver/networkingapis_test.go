package apiserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestNetworkingAndRuntimeClassAPIs checks networking.k8s.io/v1 ingresses, ingressclasses and
// networkpolicies and node.k8s.io/v1 runtimeclasses on the real API server: discovery; the default
// IngressClass given to a new Ingress; upstream's validation messages; an Ingress's /status patch, watch
// and deletecollection; NetworkPolicy defaults; and the RuntimeClass admission of pods (a missing class
// refused, overhead set from the class, nodeSelector merged or refused on conflict, tolerations added).
func TestNetworkingAndRuntimeClassAPIs(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	for gv, res := range map[string]string{"networking.k8s.io/v1": "ingresses,ingresses/status,ingressclasses,networkpolicies,servicecidrs",
		"node.k8s.io/v1": "runtimeclasses"} {
		l, err := c.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovery %s: %v", gv, err)
		}
		var names []string
		for _, r := range l.APIResources {
			names = append(names, r.Name)
		}
		for _, want := range strings.Split(res, ",") {
			if !strings.Contains(","+strings.Join(names, ",")+",", ","+want+",") {
				t.Errorf("discovery %s: %v lacks %s", gv, names, want)
			}
		}
	}

	// IngressClass: the default class is given to an Ingress that names none.
	ics := c.NetworkingV1().IngressClasses()
	if _, err := ics.Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: networkingv1.IngressClassSpec{Controller: "no-domain"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.controller: Invalid value") {
		t.Errorf("IngressClass with controller \"no-domain\": %v, want Invalid spec.controller", err)
	}
	ic, err := ics.Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nk-default",
		Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/ingress",
			Parameters: &networkingv1.IngressClassParametersReference{Kind: "Config", Name: "c"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := ic.Spec.Parameters; p.Scope == nil || *p.Scope != networkingv1.IngressClassParametersReferenceScopeCluster {
		t.Errorf("IngressClass parameters.scope = %v, want the default Cluster", p.Scope)
	}
	ic.Spec.Controller = "example.com/other"
	if _, err := ics.Update(ctx, ic, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("IngressClass controller change: %v, want immutable", err)
	}

	ings := c.NetworkingV1().Ingresses("default")
	w, err := ings.Watch(ctx, metav1.ListOptions{LabelSelector: "suite=ing"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ingress := func(name string, pathType *networkingv1.PathType) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"suite": "ing"}},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "foo.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: pathType,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
						Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}
	}
	_, err = ings.Create(ctx, ingress("no-path-type", nil), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified") {
		t.Errorf("Ingress without pathType: %v", err)
	}
	both := ingress("both", ptr.To(networkingv1.PathTypePrefix))
	both.Spec.Rules[0].HTTP.Paths[0].Backend.Resource = &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}
	if _, err := ings.Create(ctx, both, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot set both resource and service backends") {
		t.Errorf("Ingress with service and resource backends: %v", err)
	}
	ing, err := ings.Create(ctx, ingress("web", ptr.To(networkingv1.PathTypePrefix)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nk-default" {
		t.Errorf("Ingress ingressClassName = %v, want the default class nk-default", ing.Spec.IngressClassName)
	}
	ing, err = ings.Patch(ctx, "web", types.MergePatchType, []byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.7"}]}}}`),
		metav1.PatchOptions{}, "status")
	if err != nil || len(ing.Status.LoadBalancer.Ingress) != 1 || ing.Status.LoadBalancer.Ingress[0].IP != "203.0.113.7" {
		t.Fatalf("patch Ingress status: %+v, %v", ing.Status, err)
	}
	if _, err := ings.Patch(ctx, "web", types.MergePatchType, []byte(`{"status":{"loadBalancer":{"ingress":[{"hostname":"10.0.0.1"}]}}}`),
		metav1.PatchOptions{}, "status"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must be a DNS name, not an IP address") {
		t.Errorf("Ingress status hostname that is an IP: %v", err)
	}
	if _, err := ings.Create(ctx, ingress("web2", ptr.To(networkingv1.PathTypeExact)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[watch.EventType]int{}
	for seen[watch.Added] < 2 || seen[watch.Modified] < 1 {
		select {
		case ev := <-w.ResultChan():
			seen[ev.Type]++
		case <-time.After(30 * time.Second):
			t.Fatalf("Ingress watch: saw %v, want 2 ADDED and a MODIFIED", seen)
		}
	}
	if err := ings.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "suite=ing"}); err != nil {
		t.Fatal(err)
	}
	if l, err := ings.List(ctx, metav1.ListOptions{LabelSelector: "suite=ing"}); err != nil || len(l.Items) != 0 {
		t.Errorf("Ingresses after deletecollection: %v %v", l, err)
	}

	// NetworkPolicy: defaults and validation.
	nps := c.NetworkingV1().NetworkPolicies("default")
	np, err := nps.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pt := np.Spec.PolicyTypes; len(pt) != 2 || pt[0] != networkingv1.PolicyTypeIngress || pt[1] != networkingv1.PolicyTypeEgress ||
		np.Spec.Egress[0].Ports[0].Protocol == nil || *np.Spec.Egress[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("NetworkPolicy defaults: policyTypes %v, port %+v", pt, np.Spec.Egress[0].Ports[0])
	}
	_, err = nps.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
			CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24"}}}}}}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`") {
		t.Errorf("NetworkPolicy with an except outside its cidr: %v", err)
	}

	// RuntimeClass and its pod admission.
	rcs := c.NodeV1().RuntimeClasses()
	if _, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Handler: "Not_A_Label"}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "handler: Invalid value: \"Not_A_Label\"") {
		t.Errorf("RuntimeClass with handler Not_A_Label: %v", err)
	}
	if _, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"}, Handler: "runc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi")}},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"},
			Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rcPod := func(name, class string) *corev1.Pod {
		p := pod(name, "")
		p.Spec.RuntimeClassName = &class
		return p
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, rcPod("missing", "nope"), dry); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `pod rejected: RuntimeClass "nope" not found`) {
		t.Errorf("pod naming a missing RuntimeClass: %v", err)
	}
	p, err := c.CoreV1().Pods("default").Create(ctx, rcPod("sandboxed", "sandboxed"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cpu, mem := p.Spec.Overhead[corev1.ResourceCPU], p.Spec.Overhead[corev1.ResourceMemory]; cpu.String() != "10m" || mem.String() != "1Mi" ||
		p.Spec.NodeSelector["sandbox"] != "yes" {
		t.Errorf("pod under RuntimeClass sandboxed: overhead %v, nodeSelector %v", p.Spec.Overhead, p.Spec.NodeSelector)
	}
	tolerated := false
	for _, tol := range p.Spec.Tolerations {
		tolerated = tolerated || (tol.Key == "sandbox" && tol.Effect == corev1.TaintEffectNoSchedule)
	}
	if !tolerated {
		t.Errorf("pod under RuntimeClass sandboxed: tolerations %v lack the class's", p.Spec.Tolerations)
	}
	conflict := rcPod("conflict", "sandboxed")
	conflict.Spec.NodeSelector = map[string]string{"sandbox": "no"}
	if _, err := c.CoreV1().Pods("default").Create(ctx, conflict, dry); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "conflict: runtimeClass.scheduling.nodeSelector[sandbox] = yes; pod.spec.nodeSelector[sandbox] = no") {
		t.Errorf("pod whose nodeSelector conflicts with its RuntimeClass: %v", err)
	}
	own := rcPod("own-overhead", "sandboxed")
	own.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if _, err := c.CoreV1().Pods("default").Create(ctx, own, dry); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead") {
		t.Errorf("pod with its own overhead: %v", err)
	}
	noClass := pod("no-class", "")
	noClass.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if _, err := c.CoreV1().Pods("default").Create(ctx, noClass, dry); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead") {
		t.Errorf("pod with overhead and no RuntimeClass: %v", err)
	}
	if err := rcs.Delete(ctx, "sandboxed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// the admission's informer forgets the class soon after; until then the pod is still admitted
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, last = c.CoreV1().Pods("default").Create(ctx, rcPod("deleted", "sandboxed"), dry)
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), `pod rejected: RuntimeClass "sandboxed" not found`), nil
	}); err != nil {
		t.Errorf("pod naming a deleted RuntimeClass: %v", last)
	}
}
