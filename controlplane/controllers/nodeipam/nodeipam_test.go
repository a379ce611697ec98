package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func TestAllocator(t *testing.T) {
	a, err := NewAllocator("10.244.0.0/22", 24)
	if err != nil {
		t.Fatal(err)
	}
	must := func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := a.Occupy("10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	got := []string{must(a.Allocate()), must(a.Allocate()), must(a.Allocate())}
	want := []string{"10.244.0.0/24", "10.244.2.0/24", "10.244.3.0/24"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("allocations = %v, want %v (10.244.1.0/24 occupied)", got, want)
		}
	}
	if _, err := a.Allocate(); !errors.Is(err, ErrCIDRFull) {
		t.Fatalf("allocate on full range: err = %v, want ErrCIDRFull", err)
	}
	a.Release("10.244.2.0/24")
	if s := must(a.Allocate()); s != "10.244.2.0/24" {
		t.Fatalf("after release got %s, want 10.244.2.0/24", s)
	}
	for _, bad := range []string{"10.245.0.0/24", "10.244.0.0/25", "10.244.0.1/24", "nonsense"} {
		if err := a.Occupy(bad); err == nil {
			t.Errorf("Occupy(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		cidr string
		mask int
	}{{"10.244.0.0/16", 8}, {"10.244.0.0/16", 33}, {"10.0.0.0/8", 25}, {"bad", 24}} {
		if _, err := NewAllocator(tc.cidr, tc.mask); err == nil {
			t.Errorf("NewAllocator(%q, %d) accepted", tc.cidr, tc.mask)
		}
	}
	v6, err := NewAllocator("fd00:10:244::/56", 64)
	if err != nil {
		t.Fatal(err)
	}
	must(v6.Allocate())
	if s := must(v6.Allocate()); s != "fd00:10:244:1::/64" {
		t.Fatalf("second IPv6 podCIDR = %s", s)
	}
}

// TestControllerAssignsAndSurvivesRestart: a node that already has a podCIDR (as after a controller
// restart) keeps it, and new nodes get different ones.
func TestControllerAssignsAndSurvivesRestart(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Spec: v1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}}}
	client := fake.NewClientset(existing, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new1"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, "10.244.0.0/16", 24, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	_, err = client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "distinct podCIDRs", func() error {
		seen := map[string]string{}
		list, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range list.Items {
			if n.Spec.PodCIDR != "" && (len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR) {
				t.Fatalf("node %s podCIDR %q podCIDRs %v disagree", n.Name, n.Spec.PodCIDR, n.Spec.PodCIDRs)
			}
			if other, dup := seen[n.Spec.PodCIDR]; dup && n.Spec.PodCIDR != "" {
				t.Fatalf("nodes %s and %s share %s", other, n.Name, n.Spec.PodCIDR)
			}
			seen[n.Spec.PodCIDR] = n.Name
		}
		if len(seen) != 3 || seen[""] != "" || seen["10.244.0.0/24"] != "old" {
			return fmt.Errorf("podCIDRs = %v", seen)
		}
		return nil
	})
}
