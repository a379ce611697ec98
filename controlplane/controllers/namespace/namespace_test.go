package namespace

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"
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
	deleteCollection(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, nil, factory, controllertest.Logger())
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
	ns, err := client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range conditionTypes {
		wantCondition(t, ns, ct, v1.ConditionFalse, okConditions[ct][0], okConditions[ct][1])
	}
}

// TestPodsFirstAndDeletionConditions: while a pod held by a finalizer is left, nothing else in the
// terminating namespace is deleted and its conditions say what remains and which finalizer holds it
// (what upstream's OrderedNamespaceDeletion conformance spec waits for); once the pod is gone the rest
// goes, the conditions turn False and the namespace is finalized. A failing delete sets
// NamespaceDeletionContentFailure.
func TestPodsFirstAndDeletionConditions(t *testing.T) {
	now := metav1.Now()
	client := fake.NewClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &now},
			Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "gone", Finalizers: []string{"e2e.example.com/finalizer"}}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "gone"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "gone"}},
	)
	deleteCollection(client)
	controllertest.StatusSubresource(client, "namespaces")
	failSecrets := true
	client.PrependReactor("delete-collection", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failSecrets {
			return true, nil, fmt.Errorf("etcd unavailable")
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, nil, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	getNS := func() *v1.Namespace {
		t.Helper()
		ns, err := client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	controllertest.Eventually(t, "conditions of a namespace held by a pod", func() error {
		if len(getNS().Status.Conditions) != len(conditionTypes) {
			return fmt.Errorf("conditions %+v", getNS().Status.Conditions)
		}
		return nil
	})
	ns := getNS()
	wantCondition(t, ns, v1.NamespaceDeletionDiscoveryFailure, v1.ConditionFalse, "ResourcesDiscovered", "All resources successfully discovered")
	wantCondition(t, ns, v1.NamespaceDeletionGVParsingFailure, v1.ConditionFalse, "ParsedGroupVersions", "All legacy kube types successfully parsed")
	wantCondition(t, ns, v1.NamespaceDeletionContentFailure, v1.ConditionFalse, "ContentDeleted", "All content successfully deleted, may be waiting on finalization")
	wantCondition(t, ns, v1.NamespaceContentRemaining, v1.ConditionTrue, "SomeResourcesRemain", "Some resources are remaining: pods. has 1 resource instances")
	wantCondition(t, ns, v1.NamespaceFinalizersRemaining, v1.ConditionTrue, "SomeFinalizersRemain",
		"Some content in the namespace has finalizers remaining: e2e.example.com/finalizer in 1 resource instances")
	pod, err := client.CoreV1().Pods("gone").Get(ctx, "held", metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("held pod: %v, deletionTimestamp %v", err, pod.GetDeletionTimestamp())
	}
	for _, get := range []func() error{
		func() error {
			_, err := client.CoreV1().ConfigMaps("gone").Get(ctx, "cfg", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().Secrets("gone").Get(ctx, "sec", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Fatalf("deleted while a pod is left: %v", err)
		}
	}
	if len(ns.Spec.Finalizers) != 1 {
		t.Fatalf("finalized while a pod is left: %v", ns.Spec.Finalizers)
	}

	// the pod's finalizer is done: the API server removes it (the fake tracker's delete does at once)
	if err := client.CoreV1().Pods("gone").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "content failure of the secrets", func() error {
		c := condition(getNS(), v1.NamespaceDeletionContentFailure)
		if c == nil || c.Status != v1.ConditionTrue {
			return fmt.Errorf("content failure %+v", c)
		}
		return nil
	})
	wantCondition(t, getNS(), v1.NamespaceDeletionContentFailure, v1.ConditionTrue, "ContentDeletionFailed",
		"Failed to delete all resource types, 1 remaining: delete secrets in gone: etcd unavailable")
	if len(getNS().Spec.Finalizers) != 1 {
		t.Fatal("finalized although the secrets could not be deleted")
	}

	failSecrets = false
	controllertest.Eventually(t, "namespace emptied and finalized", func() error {
		if ns := getNS(); len(ns.Spec.Finalizers) != 0 {
			return fmt.Errorf("finalizers %v, conditions %+v", ns.Spec.Finalizers, ns.Status.Conditions)
		}
		return nil
	})
	ns = getNS()
	for _, ct := range conditionTypes {
		wantCondition(t, ns, ct, v1.ConditionFalse, okConditions[ct][0], okConditions[ct][1])
	}
}

func condition(ns *v1.Namespace, t v1.NamespaceConditionType) *v1.NamespaceCondition {
	for i := range ns.Status.Conditions {
		if ns.Status.Conditions[i].Type == t {
			return &ns.Status.Conditions[i]
		}
	}
	return nil
}

func wantCondition(t *testing.T, ns *v1.Namespace, ct v1.NamespaceConditionType, status v1.ConditionStatus, reason, message string) {
	t.Helper()
	c := condition(ns, ct)
	if c == nil || c.Status != status || c.Reason != reason || c.Message != message || c.LastTransitionTime.IsZero() {
		t.Fatalf("condition %s: %+v, want %s %s %q", ct, c, status, reason, message)
	}
}

// deleteCollection makes client's deletecollection (which the fake tracker does not implement; the API
// server does) delete every object of the namespace, except that one with finalizers only gets a
// deletionTimestamp, as the API server does.
func deleteCollection(client *fake.Clientset) {
	client.PrependReactor("delete-collection", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		gvr, ns := action.GetResource(), action.GetNamespace()
		list, err := client.Tracker().List(gvr, kindFor(gvr), ns)
		if err != nil {
			return true, nil, err
		}
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			m, _ := meta.Accessor(it)
			if len(m.GetFinalizers()) > 0 {
				if m.GetDeletionTimestamp() == nil {
					now := metav1.Now()
					m.SetDeletionTimestamp(&now)
					if err := client.Tracker().Update(gvr, it, ns); err != nil {
						return true, nil, err
					}
				}
				continue
			}
			if err := client.Tracker().Delete(gvr, ns, m.GetName()); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
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

// TestDiscoveredResourcesDeleted: objects of a namespaced resource that discovery lists beyond the
// built-in kinds (a CRD's) are deleted through the metadata client before the namespace is finalized;
// those of another namespace stay. While discovery fails, the finalizer stays and
// NamespaceDeletionDiscoveryFailure says why.
func TestDiscoveredResourcesDeleted(t *testing.T) {
	now := metav1.Now()
	client := fake.NewClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &now},
			Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
	)
	deleteCollection(client)
	controllertest.StatusSubresource(client, "namespaces")
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "list", "delete"}},
		{Name: "widgets/status", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "update"}},
	}}}
	var failDiscovery atomic.Bool
	failDiscovery.Store(true)
	client.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failDiscovery.Load() {
			return true, nil, fmt.Errorf("discovery unavailable")
		}
		return false, nil, nil
	})
	widget := func(ns, name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	sch := metadatafake.NewTestScheme()
	sch.AddKnownTypeWithName(widgets.GroupVersion().WithKind("Widget"), &metav1.PartialObjectMetadata{})
	sch.AddKnownTypeWithName(widgets.GroupVersion().WithKind("WidgetList"), &metav1.PartialObjectMetadataList{})
	meta := metadatafake.NewSimpleMetadataClient(sch, widget("gone", "a"), widget("gone", "b"), widget("live", "c"))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, meta, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	widgetsIn := func(ns string) int {
		l, err := meta.Resource(widgets).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	controllertest.Eventually(t, "discovery failure reported", func() error {
		ns, err := client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range ns.Status.Conditions {
			if cond.Type == v1.NamespaceDeletionDiscoveryFailure && cond.Status == v1.ConditionTrue && cond.Reason == "DiscoveryFailed" {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", ns.Status.Conditions)
	})
	if ns, _ := client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{}); len(ns.Spec.Finalizers) != 1 || widgetsIn("gone") != 2 {
		t.Fatalf("finalized (%v) or emptied (%d widgets left) while discovery fails", ns.Spec.Finalizers, widgetsIn("gone"))
	}
	failDiscovery.Store(false)
	controllertest.Eventually(t, "custom objects deleted, namespace finalized", func() error {
		ns, err := client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n := widgetsIn("gone"); n != 0 || len(ns.Spec.Finalizers) != 0 {
			return fmt.Errorf("%d widgets left, finalizers %v", n, ns.Spec.Finalizers)
		}
		return nil
	})
	if n := widgetsIn("live"); n != 1 {
		t.Fatalf("%d widgets left in another namespace, want 1", n)
	}
}
