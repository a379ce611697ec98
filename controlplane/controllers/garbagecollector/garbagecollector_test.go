package garbagecollector

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

// TestCollectsOrphansKeepsOwned: a pod whose ReplicaSet is gone is deleted; a pod whose owner lives
// stays; a pod with one live and one vanished owner loses only the dangling reference.
func TestCollectsOrphansKeepsOwned(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: "default", UID: "live-uid"}}
	ref := func(name, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: types.UID(uid)}
	}
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", OwnerReferences: []metav1.OwnerReference{ref("gone", "gone-uid")}}}
	owned := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: "default", OwnerReferences: []metav1.OwnerReference{ref("live", "live-uid")}}}
	// Same name as the live ReplicaSet but another UID: a reference to a previous incarnation.
	mixed := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mixed", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{ref("live", "old-uid"), ref("live", "live-uid")}}}
	client := fake.NewClientset(rs, orphan, owned, mixed)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, nil, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })
	controllertest.Eventually(t, "orphan collected, dangling reference dropped", func() error {
		_, errOrphan := client.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
		m, errMixed := client.CoreV1().Pods("default").Get(ctx, "mixed", metav1.GetOptions{})
		if !apierrors.IsNotFound(errOrphan) || errMixed != nil || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "live-uid" {
			return fmt.Errorf("orphan err=%v, mixed err=%v refs=%+v", errOrphan, errMixed, m.OwnerReferences)
		}
		return nil
	})
	if _, err := client.CoreV1().Pods("default").Get(ctx, "owned", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod with a live owner was collected: %v", err)
	}
	// Deleting the live owner collects its dependents.
	if err := client.AppsV1().ReplicaSets("default").Delete(ctx, "live", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "dependents of a deleted owner collected", func() error {
		list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			return fmt.Errorf("%d pods left (err %v)", len(list.Items), err)
		}
		return nil
	})
}

// TestCollectsDiscoveredKinds: a kind outside package resources that discovery lists (a CRD's) is
// watched through the metadata client: its object whose owner is gone is collected, the one whose owner
// lives stays.
func TestCollectsDiscoveredKinds(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: "default", UID: "live-uid"}}
	client := fake.NewClientset(cm)
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}},
	}}}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widget := func(name, ownerUID string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid"),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "live", UID: types.UID(ownerUID)}}}}
	}
	sch := metadatafake.NewTestScheme()
	sch.AddKnownTypeWithName(widgets.GroupVersion().WithKind("Widget"), &metav1.PartialObjectMetadata{})
	sch.AddKnownTypeWithName(widgets.GroupVersion().WithKind("WidgetList"), &metav1.PartialObjectMetadataList{})
	meta := metadatafake.NewSimpleMetadataClient(sch, widget("orphan", "old-uid"), widget("owned", "live-uid"))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, meta, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })
	controllertest.Eventually(t, "the orphaned widget collected", func() error {
		if _, err := meta.Resource(widgets).Namespace("default").Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("orphan: %v", err)
		}
		return nil
	})
	if _, err := meta.Resource(widgets).Namespace("default").Get(ctx, "owned", metav1.GetOptions{}); err != nil {
		t.Fatalf("widget with a live owner was collected: %v", err)
	}
}
