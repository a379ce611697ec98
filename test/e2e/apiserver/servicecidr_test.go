package apiserver_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestServiceFieldSelectors lists and watches services with the selectors kube-proxy and kubectl use:
// spec.clusterIP!=None leaves headless services out, spec.type=NodePort picks NodePort services.
func TestServiceFieldSelectors(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	svc := func(name string, typ corev1.ServiceType, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ip,
			Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	// Watch from now, before the services exist, with kube-proxy's selector.
	w, err := c.CoreV1().Services("sel").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.clusterIP!=None"})
	if err != nil {
		t.Fatalf("watch spec.clusterIP!=None: %v", err)
	}
	t.Cleanup(w.Stop)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sel"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sv := range []*corev1.Service{svc("headless", corev1.ServiceTypeClusterIP, corev1.ClusterIPNone),
		svc("cip", corev1.ServiceTypeClusterIP, ""), svc("np", corev1.ServiceTypeNodePort, "")} {
		if _, err := c.CoreV1().Services("sel").Create(ctx, sv, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", sv.Name, err)
		}
	}
	names := func(l *corev1.ServiceList) string {
		var n []string
		for _, i := range l.Items {
			n = append(n, i.Name)
		}
		return strings.Join(n, ",")
	}
	l, err := c.CoreV1().Services("sel").List(ctx, metav1.ListOptions{FieldSelector: "spec.clusterIP!=None"})
	if err != nil || names(l) != "cip,np" {
		t.Fatalf("list spec.clusterIP!=None: want cip,np, got %q (%v)", names(l), err)
	}
	l, err = c.CoreV1().Services("").List(ctx, metav1.ListOptions{FieldSelector: "spec.type=NodePort"})
	if err != nil || names(l) != "np" {
		t.Fatalf("list spec.type=NodePort: want np, got %q (%v)", names(l), err)
	}
	cip, err := c.CoreV1().Services("sel").Get(ctx, "cip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err = c.CoreV1().Services("sel").List(ctx, metav1.ListOptions{FieldSelector: "spec.clusterIP=" + cip.Spec.ClusterIP})
	if err != nil || names(l) != "cip" {
		t.Fatalf("list spec.clusterIP=%s: want cip, got %q (%v)", cip.Spec.ClusterIP, names(l), err)
	}
	var seen []string
	for len(seen) < 2 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("watch event %s %v", ev.Type, ev.Object)
			}
			seen = append(seen, ev.Object.(*corev1.Service).Name)
		case <-time.After(30 * time.Second):
			t.Fatalf("watch spec.clusterIP!=None: saw only %v", seen)
		}
	}
	if strings.Join(seen, ",") != "cip,np" {
		t.Fatalf("watch spec.clusterIP!=None: want cip,np, got %v", seen)
	}
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("watch spec.clusterIP!=None delivered %s %s", ev.Type, ev.Object.(*corev1.Service).Name)
	case <-time.After(time.Second):
	}
	if _, err := c.CoreV1().Services("sel").List(ctx, metav1.ListOptions{FieldSelector: "spec.ports=80"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("unsupported service field selector: want 400, got %v", err)
	}
}

// TestServiceCIDR: the default ServiceCIDR "kubernetes" holds the configured range and is Ready; nodes
// read it; other ServiceCIDRs, a change of its range and its deletion are refused with the reason; the API
// server repairs its status at start.
func TestServiceCIDR(t *testing.T) {
	s := fw.Start(t, fw.Options{ServiceCIDR: "10.97.0.0/16"})
	ctx, c := ctxT(t), s.Client
	api := c.NetworkingV1().ServiceCIDRs()
	checkDefault := func(when string) {
		t.Helper()
		sc, err := api.Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: get default ServiceCIDR: %v", when, err)
		}
		if len(sc.Spec.CIDRs) != 1 || sc.Spec.CIDRs[0] != "10.97.0.0/16" {
			t.Fatalf("%s: default ServiceCIDR cidrs %v, want [10.97.0.0/16]", when, sc.Spec.CIDRs)
		}
		if !apimeta.IsStatusConditionTrue(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
			t.Fatalf("%s: default ServiceCIDR not Ready: %+v", when, sc.Status.Conditions)
		}
	}
	checkDefault("start")

	node := s.NodeClient(t, "cidr-node").NetworkingV1().ServiceCIDRs()
	if l, err := node.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].Name != "kubernetes" {
		t.Fatalf("node lists ServiceCIDRs: %v %v", err, l)
	}
	w, err := node.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubernetes"})
	if err != nil {
		t.Fatalf("node watches ServiceCIDRs: %v", err)
	}
	w.Stop()
	if _, err := node.UpdateStatus(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}}, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node updates ServiceCIDR status: want 403, got %v", err)
	}

	other := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.200.0.0/16"}}}
	if _, err := api.Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "--service-cluster-ip-range 10.97.0.0/16") {
		t.Fatalf("create another ServiceCIDR: want 422 naming the configured range, got %v", err)
	}
	if _, err := api.Get(ctx, "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused ServiceCIDR stored: %v", err)
	}
	patch := []byte(`{"spec":{"cidrs":["10.97.0.0/16","fd00::/108"]}}`)
	if _, err := api.Patch(ctx, "kubernetes", types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cidrs") {
		t.Fatalf("change the default's cidrs: want 422, got %v", err)
	}
	if err := api.Delete(ctx, "kubernetes", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("delete the default ServiceCIDR: want 403 with the reason, got %v", err)
	}
	if err := api.Delete(ctx, "missing", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("delete a missing ServiceCIDR: want 404, got %v", err)
	}
	checkDefault("after refused changes")

	// An admin marks it not ready through /status; the restarted API server repairs it.
	sc, err := api.Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&sc.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady,
		Status: metav1.ConditionFalse, Reason: "Test", Message: "made not ready by the test"})
	if _, err := api.UpdateStatus(ctx, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("admin updates ServiceCIDR status: %v", err)
	}
	if sc, _ := api.Get(ctx, "kubernetes", metav1.GetOptions{}); apimeta.IsStatusConditionTrue(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		t.Fatalf("status update not stored: %+v", sc.Status.Conditions)
	}
	s.Restart(t)
	checkDefault("after restart")
}
