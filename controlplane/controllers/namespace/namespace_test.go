package namespace

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

// TestTerminatingNamespaceEmptiedThenFinalized: the contents of a terminating namespace are deleted
// and then the "kubernetes" finalizer is removed; an active namespace is left alone.
func TestTerminatingNamespaceEmptiedThenFinalized(t *testing.T) {
	now := metav1.Now()
	client := fake.NewClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &now},
			Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}, Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "gone"}},
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "gone"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "gone"}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "live"}},
	)
	// The fake tracker does not implement deletecollection; the API server does.
	client.PrependReactor("delete-collection", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		gvr, ns := action.GetResource(), action.GetNamespace()
		list, err := client.Tracker().List(gvr, kindFor(gvr), ns)
		if err != nil {
			return true, nil, err
		}
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			m, _ := meta.Accessor(it)
			if err := client.Tracker().Delete(gvr, ns, m.GetName()); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	controllertest.Eventually(t, "namespace emptied and finalized", func() error {
		ns, err := client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cms, _ := client.CoreV1().ConfigMaps("gone").List(ctx, metav1.ListOptions{})
		svcs, _ := client.CoreV1().Services("gone").List(ctx, metav1.ListOptions{})
		pods, _ := client.CoreV1().Pods("gone").List(ctx, metav1.ListOptions{})
		if n := len(cms.Items) + len(svcs.Items) + len(pods.Items); n != 0 || len(ns.Spec.Finalizers) != 0 {
			return fmt.Errorf("%d objects left, finalizers %v", n, ns.Spec.Finalizers)
		}
		return nil
	})
	if _, err := client.CoreV1().ConfigMaps("live").Get(ctx, "cfg", metav1.GetOptions{}); err != nil {
		t.Fatalf("object in an active namespace deleted: %v", err)
	}
}

// kindFor finds the kind whose conventional resource name is gvr's.
func kindFor(gvr schema.GroupVersionResource) schema.GroupVersionKind {
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.GroupVersion() == gvr.GroupVersion() {
			if plural, _ := meta.UnsafeGuessKindToResource(gvk); plural == gvr {
				return gvk
			}
		}
	}
	return gvr.GroupVersion().WithKind("")
}
