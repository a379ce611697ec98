package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

func TestDeleteFirstRanking(t *testing.T) {
	now := time.Now()
	mk := func(name, node string, phase v1.PodPhase, ready bool, readySince time.Duration, created time.Duration) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))},
			Spec: v1.PodSpec{NodeName: node}, Status: v1.PodStatus{Phase: phase}}
		if ready {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-readySince))}}
		}
		return p
	}
	pods := []*v1.Pod{
		mk("ready-long", "n", v1.PodRunning, true, time.Hour, 2*time.Hour),
		mk("ready-short", "n", v1.PodRunning, true, time.Minute, 2*time.Hour),
		mk("running-unready", "n", v1.PodRunning, false, 0, time.Hour),
		mk("pending", "n", v1.PodPending, false, 0, time.Hour),
		mk("unscheduled", "", v1.PodPending, false, 0, time.Hour),
	}
	sort.SliceStable(pods, func(i, j int) bool { return deleteFirst(pods[i], pods[j]) })
	want := []string{"unscheduled", "pending", "running-unready", "ready-short", "ready-long"}
	for i, p := range pods {
		if p.Name != want[i] {
			var got []string
			for _, p := range pods {
				got = append(got, p.Name)
			}
			t.Fatalf("deletion order = %v, want %v", got, want)
		}
	}
}

func TestReplicaSetCreatesAndTrims(t *testing.T) {
	replicas := int32(3)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "rs-uid", Generation: 1},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo"}}}},
		},
	}
	client := fake.NewClientset(rs)
	controllertest.StatusSubresource(client, "replicasets", "pods")
	controllertest.GenerateNames(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })

	waitPods := func(n int) []v1.Pod {
		t.Helper()
		var pods []v1.Pod
		controllertest.Eventually(t, "pod count", func() error {
			list, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			got, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
			if len(list.Items) != n || got.Status.Replicas != int32(n) || got.Status.ObservedGeneration != 1 {
				return fmt.Errorf("want %d pods, have %d, status %+v", n, len(list.Items), got.Status)
			}
			pods = list.Items
			return nil
		})
		return pods
	}
	pods := waitPods(3)
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != "rs-uid" || ref.Kind != "ReplicaSet" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Fatalf("pod %s ownerReferences = %+v", p.Name, p.OwnerReferences)
		}
		if p.Labels["app"] != "web" || p.Spec.Containers[0].Image != "demo" {
			t.Fatalf("pod %s not from template: %+v", p.Name, p)
		}
	}
	// Mark one pod Ready: status counts it.
	podClient := client.CoreV1().Pods("default")
	controllertest.Modify(t, func() (*v1.Pod, error) { return podClient.Get(ctx, pods[0].Name, metav1.GetOptions{}) },
		func(ready *v1.Pod) {
			ready.Status.Phase = v1.PodRunning
			ready.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		},
		func(ready *v1.Pod) error {
			_, err := podClient.UpdateStatus(ctx, ready, metav1.UpdateOptions{})
			return err
		})
	controllertest.Eventually(t, "ready counted", func() error {
		got, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		if got.Status.ReadyReplicas != 1 || got.Status.AvailableReplicas != 1 || got.Status.FullyLabeledReplicas != 3 {
			return fmt.Errorf("status = %+v", got.Status)
		}
		return nil
	})
	// Scale to 1: the ready pod is the one kept.
	one := int32(1)
	rsClient := client.AppsV1().ReplicaSets("default")
	controllertest.Modify(t, func() (*appsv1.ReplicaSet, error) { return rsClient.Get(ctx, "web", metav1.GetOptions{}) },
		func(cur *appsv1.ReplicaSet) {
			cur.Spec.Replicas = &one
			cur.Generation = 1
		},
		func(cur *appsv1.ReplicaSet) error {
			_, err := rsClient.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	left := waitPods(1)
	if left[0].Name != pods[0].Name {
		t.Fatalf("scale-down kept %s, want the ready pod %s", left[0].Name, pods[0].Name)
	}
}

// TestReplicationControllerFailureCondition: an RC whose pod creations are refused gets
// ReplicaFailure=True reason FailedCreate with the API error as message and a FailedCreate event; once
// creations succeed its pods are made and the condition is removed.
func TestReplicationControllerFailureCondition(t *testing.T) {
	replicas := int32(2)
	rc := &v1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "default", UID: "rc-uid", Generation: 1},
		Spec: v1.ReplicationControllerSpec{Replicas: &replicas, Selector: map[string]string{"app": "rc"},
			Template: &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rc"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo"}}}}},
	}
	client := fake.NewClientset(rc)
	controllertest.StatusSubresource(client, "replicationcontrollers")
	var refuse atomic.Bool
	refuse.Store(true)
	client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewForbidden(v1.Resource("pods"), "", errors.New("exceeded quota: q, requested: pods=1"))
		}
		return false, nil, nil
	})
	controllertest.GenerateNames(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewReplicationControllers(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })
	controllertest.Eventually(t, "ReplicaFailure", func() error {
		got, _ := client.CoreV1().ReplicationControllers("default").Get(ctx, "rc", metav1.GetOptions{})
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.ReplicationControllerReplicaFailure && cond.Status == v1.ConditionTrue && cond.Reason == "FailedCreate" &&
				strings.Contains(cond.Message, "exceeded quota") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	refuse.Store(false)
	controllertest.Eventually(t, "pods made, condition removed", func() error {
		got, _ := client.CoreV1().ReplicationControllers("default").Get(ctx, "rc", metav1.GetOptions{})
		pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if len(pods.Items) != 2 || len(got.Status.Conditions) != 0 || got.Status.Replicas != 2 || got.Status.ObservedGeneration != 1 {
			return fmt.Errorf("%d pods, status %+v", len(pods.Items), got.Status)
		}
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.UID != "rc-uid" {
				return fmt.Errorf("pod %s owner %+v", p.Name, p.OwnerReferences)
			}
		}
		return nil
	})
}

// TestReplicaSetAdoptsAndReleases: a matching pod without a controller is adopted (controller
// ownerReference, no new pod made); relabelled out of the selector it is released and replaced.
func TestReplicaSetAdoptsAndReleases(t *testing.T) {
	one := int32(1)
	labels := map[string]string{"app": "web"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "rs-uid", Generation: 1},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo"}}}}},
	}
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", UID: "orphan-uid", Labels: labels},
		Spec: rs.Spec.Template.Spec}
	client := fake.NewClientset(rs, orphan)
	controllertest.StatusSubresource(client, "replicasets")
	controllertest.GenerateNames(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 2) })
	controllertest.Eventually(t, "orphan adopted", func() error {
		p, _ := client.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
		got, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "rs-uid" || got.Status.Replicas != 1 {
			return fmt.Errorf("owners %+v, status %+v", p.OwnerReferences, got.Status)
		}
		return nil
	})
	if list, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); len(list.Items) != 1 {
		t.Fatalf("%d pods after adoption, want the orphan only", len(list.Items))
	}
	podClient := client.CoreV1().Pods("default")
	controllertest.Modify(t, func() (*v1.Pod, error) { return podClient.Get(ctx, "orphan", metav1.GetOptions{}) },
		func(p *v1.Pod) { p.Labels = map[string]string{"app": "other"} },
		func(p *v1.Pod) error { _, err := podClient.Update(ctx, p, metav1.UpdateOptions{}); return err })
	controllertest.Eventually(t, "released and replaced", func() error {
		p, _ := client.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
		list, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if len(p.OwnerReferences) != 0 || len(list.Items) != 2 {
			return fmt.Errorf("orphan owners %+v, %d pods", p.OwnerReferences, len(list.Items))
		}
		return nil
	})
}
