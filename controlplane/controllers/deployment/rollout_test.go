package deployment

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/controllertest"
)

// TestRollingSteps drives the controller with a fake clientset and hand-written ReplicaSet statuses
// (no ReplicaSet controller runs): the first ReplicaSet gets every replica; after a template change
// the new one starts at maxSurge and the old one is scaled down only as far as maxUnavailable allows.
func TestRollingSteps(t *testing.T) {
	replicas := int32(4)
	one := intstr.FromInt32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "d-uid", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo:v1"}}}},
		},
	}
	client := fake.NewClientset(d)
	controllertest.StatusSubresource(client, "deployments", "replicasets")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	rsByRevision := func() map[string]*appsv1.ReplicaSet {
		list, _ := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
		out := map[string]*appsv1.ReplicaSet{}
		for i := range list.Items {
			out[list.Items[i].Annotations[RevisionAnnotation]] = &list.Items[i]
		}
		return out
	}
	// markAvailable plays the ReplicaSet controller: all of the set's replicas exist and are available.
	markAvailable := func(rs *appsv1.ReplicaSet, available int32) {
		t.Helper()
		rsClient := client.AppsV1().ReplicaSets("default")
		controllertest.Modify(t, func() (*appsv1.ReplicaSet, error) { return rsClient.Get(ctx, rs.Name, metav1.GetOptions{}) },
			func(rs *appsv1.ReplicaSet) {
				rs.Status = appsv1.ReplicaSetStatus{Replicas: *rs.Spec.Replicas, ReadyReplicas: available, AvailableReplicas: available,
					ObservedGeneration: rs.Generation}
			},
			func(rs *appsv1.ReplicaSet) error {
				_, err := rsClient.UpdateStatus(ctx, rs, metav1.UpdateOptions{})
				return err
			})
	}
	var v1rs *appsv1.ReplicaSet
	controllertest.Eventually(t, "first replicaset", func() error {
		v1rs = rsByRevision()["1"]
		if v1rs == nil || *v1rs.Spec.Replicas != 4 {
			return fmt.Errorf("replicasets %v", rsByRevision())
		}
		return nil
	})
	hash := v1rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	if hash == "" || v1rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || v1rs.Name != "web-"+hash ||
		!metav1.IsControlledBy(v1rs, d) {
		t.Fatalf("first replicaset %s labels %v selector %v owners %v", v1rs.Name, v1rs.Labels, v1rs.Spec.Selector, v1rs.OwnerReferences)
	}
	markAvailable(v1rs, 4)

	deployments := client.AppsV1().Deployments("default")
	controllertest.Modify(t, func() (*appsv1.Deployment, error) { return deployments.Get(ctx, "web", metav1.GetOptions{}) },
		func(cur *appsv1.Deployment) {
			cur.Spec.Template.Spec.Containers[0].Image = "demo:v2"
			cur.Generation = 2
		},
		func(cur *appsv1.Deployment) error {
			_, err := deployments.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	// maxSurge 1 and maxUnavailable 1 on 4 replicas: the rollout may run 5 pods and needs 3
	// available, so it settles at new 2 / old 3 and goes no further while no new pod is available.
	settled := func() error {
		m := rsByRevision()
		if m["2"] == nil || *m["2"].Spec.Replicas != 2 || *m["1"].Spec.Replicas != 3 {
			return fmt.Errorf("new %v old %v", m["2"] != nil, *m["1"].Spec.Replicas)
		}
		return nil
	}
	controllertest.Eventually(t, "rollout held at the availability floor", settled)
	m := rsByRevision()
	markAvailable(m["1"], 3)
	markAvailable(m["2"], 0)
	for range 10 {
		time.Sleep(30 * time.Millisecond)
		if err := settled(); err != nil {
			t.Fatalf("rollout moved past the availability floor with no new pod available: %v", err)
		}
	}
	m = rsByRevision()
	markAvailable(m["2"], 2)
	controllertest.Eventually(t, "old set scaled down as new pods become available", func() error {
		m := rsByRevision()
		if *m["1"].Spec.Replicas != 1 {
			return fmt.Errorf("old %d new %d", *m["1"].Spec.Replicas, *m["2"].Spec.Replicas)
		}
		return nil
	})
}

// TestProgressDeadlineExceeded: a rollout whose pods never become available is reported
// Progressing=False, reason ProgressDeadlineExceeded, once progressDeadlineSeconds pass, and
// Available=False while below maxUnavailable.
func TestProgressDeadlineExceeded(t *testing.T) {
	replicas, deadline := int32(2), int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: "default", UID: "d-uid", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			ProgressDeadlineSeconds: &deadline,
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stuck"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "stuck"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "demo:v1"}}}},
		},
	}
	client := fake.NewClientset(d)
	controllertest.StatusSubresource(client, "deployments", "replicasets")
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, controllertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.Start(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })
	controllertest.Eventually(t, "ProgressDeadlineExceeded", func() error {
		cur, err := client.AppsV1().Deployments("default").Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return err
		}
		prog, avail := getCondition(&cur.Status, appsv1.DeploymentProgressing), getCondition(&cur.Status, appsv1.DeploymentAvailable)
		if prog == nil || prog.Status != v1.ConditionFalse || prog.Reason != ReasonProgressDeadline {
			return fmt.Errorf("Progressing = %+v", prog)
		}
		if avail == nil || avail.Status != v1.ConditionFalse {
			return fmt.Errorf("Available = %+v", avail)
		}
		return nil
	})
}
