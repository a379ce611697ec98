package apiserver_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestAllocationsSurviveRestart: a ClusterIP and a NodePort handed out before an API server restart are
// still taken after it, and free again once their service is deleted.
func TestAllocationsSurviveRestart(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx, c := ctxT(t), s.Client
	svc := func(name, ip string, nodePort int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80, NodePort: nodePort}}}}
	}
	a, err := c.CoreV1().Services("default").Create(ctx, svc("a", "", 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip, np := a.Spec.ClusterIP, a.Spec.Ports[0].NodePort
	s.Restart(t)
	if _, err := c.CoreV1().Services("default").Create(ctx, svc("b", ip, 0), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("ClusterIP %s after restart: want 422 (taken), got %v", ip, err)
	}
	if _, err := c.CoreV1().Services("default").Create(ctx, svc("b", "", np), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("NodePort %d after restart: want 422 (taken), got %v", np, err)
	}
	if err := c.CoreV1().Services("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := c.CoreV1().Services("default").Create(ctx, svc("b", ip, np), metav1.CreateOptions{})
	if err != nil || b.Spec.ClusterIP != ip || b.Spec.Ports[0].NodePort != np {
		t.Fatalf("released values not reusable: %v %+v", err, b)
	}
	// out of range
	if _, err := c.CoreV1().Services("default").Create(ctx, svc("c", "192.168.1.1", 0), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("ClusterIP outside the service CIDR: want 422, got %v", err)
	}
	if _, err := c.CoreV1().Services("default").Create(ctx, svc("c", "", 80), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("NodePort outside the range: want 422, got %v", err)
	}
}
