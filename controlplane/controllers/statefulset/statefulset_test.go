package statefulset

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

// start runs the controller on a fake clientset holding objs until the test ends.
func start(t *testing.T, objs ...runtime.Object) (*fake.Clientset, context.Context) {
	t.Helper()
	client := fake.NewClientset(objs...)
	controllertest.StatusSubresource(client, "statefulsets")
	f := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, f, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return client, controllertest.Start(t, f, func(ctx context.Context) { c.Run(ctx, 1) })
}

// TestControllerAgainstFakeClient runs the controller on a fake clientset: a set of 2 gets one
// ControllerRevision and web-0; an orphan web-1 matching the selector is adopted (a replica, counted
// in status) and, having no revision, replaced by the rolling update once web-0 is Ready; events
// carry upstream's messages.
func TestControllerAgainstFakeClient(t *testing.T) {
	set := testSet(2, appsv1.OrderedReadyPodManagement)
	orphan := testPod(1, "", true)
	orphan.UID = "orphan-uid"
	client, ctx := start(t, set, orphan)
	var rev string
	controllertest.Eventually(t, "revision and web-0", func() error {
		revs, err := client.AppsV1().ControllerRevisions("ns").List(ctx, metav1.ListOptions{})
		if err != nil || len(revs.Items) != 1 {
			return fmt.Errorf("revisions %v %v", revs, err)
		}
		rev = revs.Items[0].Name
		if revs.Items[0].Revision != 1 || !metav1.IsControlledBy(&revs.Items[0], set) {
			return fmt.Errorf("revision %+v", revs.Items[0].ObjectMeta)
		}
		p, err := client.CoreV1().Pods("ns").Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev {
			return fmt.Errorf("web-0 revision %q, want %q", p.Labels[appsv1.ControllerRevisionHashLabelKey], rev)
		}
		return nil
	})
	// web-0 becomes Running and Ready (the fake has no kubelet)
	p, _ := client.CoreV1().Pods("ns").Get(ctx, "web-0", metav1.GetOptions{})
	p.Status = testPod(0, "", true).Status
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "web-1 replaced by the rolling update", func() error {
		p, err := client.CoreV1().Pods("ns").Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev || !metav1.IsControlledBy(p, set) || p.UID == "orphan-uid" {
			return fmt.Errorf("web-1 revision %q", p.Labels[appsv1.ControllerRevisionHashLabelKey])
		}
		return nil
	})
	controllertest.Eventually(t, "status", func() error {
		s, err := client.AppsV1().StatefulSets("ns").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := s.Status
		// the new web-1 is Pending (no kubelet): 2 replicas, both updated, 1 ready
		if st.Replicas != 2 || st.ReadyReplicas != 1 || st.UpdatedReplicas != 2 || st.CurrentRevision != rev || st.UpdateRevision != rev ||
			st.ObservedGeneration != 2 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	controllertest.Eventually(t, "events", func() error {
		evs, err := client.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		want := map[string]bool{"create Pod web-0 in StatefulSet web successful": false, "delete Pod web-1 in StatefulSet web successful": false}
		for _, e := range evs.Items {
			if _, ok := want[e.Message]; ok && e.Type == v1.EventTypeNormal {
				want[e.Message] = true
			}
		}
		for m, seen := range want {
			if !seen {
				return fmt.Errorf("no event %q among %d", m, len(evs.Items))
			}
		}
		return nil
	})
}

// TestReleaseAndForeignOwner: an owned pod whose labels stop matching the selector loses its
// ownerReference to the set; a pod named like a replica but owned by another controller is left alone.
func TestReleaseAndForeignOwner(t *testing.T) {
	set := testSet(0, appsv1.OrderedReadyPodManagement)
	strayed := testPod(0, "", true)
	strayed.Labels["app"] = "other"
	strayed.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, kind)}
	foreign := testPod(1, "", true)
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
	client, ctx := start(t, set, strayed, foreign)
	controllertest.Eventually(t, "web-0 released", func() error {
		p, err := client.CoreV1().Pods("ns").Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.OwnerReferences) != 0 {
			return fmt.Errorf("owners %v", p.OwnerReferences)
		}
		return nil
	})
	controllertest.Eventually(t, "status observed", func() error {
		s, err := client.AppsV1().StatefulSets("ns").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || s.Status.ObservedGeneration != 2 || s.Status.Replicas != 0 {
			return fmt.Errorf("status %+v %v", s.Status, err)
		}
		return nil
	})
	p, err := client.CoreV1().Pods("ns").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" {
		t.Fatalf("foreign web-1 touched: %+v %v", p, err)
	}
}
