package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// TestReplicationController runs core/v1 ReplicationControllers through the API server and the
// replication controller: selector and labels default from the template; bad specs are 422 naming the
// field; an RC of 2 gets 2 Ready pods with a controller ownerReference, SuccessfulCreate events and
// status (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas, observedGeneration); /scale
// reads and sets replicas; a deleted pod is replaced; a matching orphan is adopted (and the extra pod
// trimmed); a pod relabelled out of the selector is released and replaced; the garbage collector orphans the pods (orphan deletion) or deletes them first
// (foreground deletion).
func TestReplicationController(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("node-a", "4", "8Gi")
	rcs := c.Client.CoreV1().ReplicationControllers("default")

	tmpl := demoDeployment("rc", 2, "demo:v1").Spec.Template
	two := int32(2)
	rc := &v1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"},
		Spec: v1.ReplicationControllerSpec{Replicas: &two, Template: &tmpl}}

	// Validation: restartPolicy must be Always, the selector must match the template, replicas >= 0.
	for _, bad := range []struct {
		name, field string
		mutate      func(*v1.ReplicationController)
	}{
		{"never", "spec.template.spec.restartPolicy", func(r *v1.ReplicationController) { r.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyNever }},
		{"mismatch", "spec.template.metadata.labels", func(r *v1.ReplicationController) { r.Spec.Selector = map[string]string{"app": "other"} }},
		{"negative", "spec.replicas", func(r *v1.ReplicationController) { r.Spec.Replicas = new(int32); *r.Spec.Replicas = -1 }},
		{"no-template", "spec.template", func(r *v1.ReplicationController) {
			r.Spec.Template = nil
			r.Spec.Selector = map[string]string{"a": "b"}
		}},
	} {
		b := rc.DeepCopy()
		b.Name = bad.name
		bad.mutate(b)
		if _, err := rcs.Create(ctx, b, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("create %s: %v, want 422 naming %s", bad.name, err, bad.field)
		}
	}

	created, err := rcs.Create(ctx, rc, metav1.CreateOptions{})
	must(t, err)
	if created.Spec.Selector["app"] != "rc" || created.Labels["app"] != "rc" || created.Generation != 1 {
		t.Fatalf("selector %v labels %v generation %d: want both defaulted from the template, generation 1",
			created.Spec.Selector, created.Labels, created.Generation)
	}
	waitRC := func(n int32) []v1.Pod {
		t.Helper()
		var pods []v1.Pod
		eventually(t, 30*time.Second, "rc pods", func() error {
			var err error
			if pods, err = c.activePods("default", "app=rc"); err != nil {
				return err
			}
			got, err := rcs.Get(ctx, "rc", metav1.GetOptions{})
			if err != nil {
				return err
			}
			st := got.Status
			ready := 0
			for _, p := range pods {
				if isReady(&p) {
					ready++
				}
			}
			if len(pods) != int(n) || ready != int(n) || st.Replicas != n || st.ReadyReplicas != n || st.AvailableReplicas != n ||
				st.FullyLabeledReplicas != n || st.ObservedGeneration != got.Generation {
				return errorf("%d pods (%d ready), status %+v, generation %d", len(pods), ready, st, got.Generation)
			}
			return nil
		})
		return pods
	}
	pods := waitRC(2)
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.UID != created.UID ||
			ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Fatalf("pod %s ownerReferences %+v", p.Name, p.OwnerReferences)
		}
	}
	eventually(t, 20*time.Second, "SuccessfulCreate events", func() error {
		evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "ReplicationController", "involvedObject.name": "rc", "reason": "SuccessfulCreate"}.String()})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 || evs.Items[0].Source.Component != "replication-controller" {
			return errorf("events %+v", evs.Items)
		}
		return nil
	})

	// /scale
	sc, err := rcs.GetScale(ctx, "rc", metav1.GetOptions{})
	must(t, err)
	if sc.Spec.Replicas != 2 || sc.Status.Replicas != 2 || sc.Status.Selector != "app=rc" {
		t.Fatalf("scale = %+v", sc)
	}
	_, err = rcs.UpdateScale(ctx, "rc", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "rc"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, metav1.UpdateOptions{})
	must(t, err)
	pods = waitRC(3)

	// A deleted pod is replaced.
	must(t, c.Client.CoreV1().Pods("default").Delete(ctx, pods[0].Name, metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "deleted pod replaced", func() error {
		ps, err := c.activePods("default", "app=rc")
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.UID == pods[0].UID {
				return errorf("pod %s still active", p.Name)
			}
		}
		if len(ps) != 3 {
			return errorf("%d pods", len(ps))
		}
		return nil
	})
	pods = waitRC(3)

	// A matching orphan is adopted; the RC then has 4 and deletes one.
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"app": "rc"}}, Spec: tmpl.Spec}
	_, err = c.Client.CoreV1().Pods("default").Create(ctx, orphan, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "orphan adopted, back to 3", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
		adopted := err == nil && metav1.GetControllerOf(p) != nil && metav1.GetControllerOf(p).UID == created.UID
		if apierrors.IsNotFound(err) {
			adopted = true // adopted, then chosen for deletion (the youngest, unready pod)
		}
		ps, lerr := c.activePods("default", "app=rc")
		if lerr != nil {
			return lerr
		}
		if !adopted || len(ps) != 3 {
			return errorf("orphan adopted %v, %d active pods", adopted, len(ps))
		}
		return nil
	})
	pods = waitRC(3)

	// A pod relabelled out of the selector is released and replaced.
	released := pods[0].Name
	_, err = c.Client.CoreV1().Pods("default").Patch(ctx, released, types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"gone"}}}`), metav1.PatchOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "relabelled pod released", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, released, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.OwnerReferences) != 0 {
			return errorf("ownerReferences %+v", p.OwnerReferences)
		}
		return nil
	})
	pods = waitRC(3)

	// Orphan deletion: the RC goes, its pods stay without an ownerReference.
	orphanPolicy := metav1.DeletePropagationOrphan
	must(t, rcs.Delete(ctx, "rc", metav1.DeleteOptions{PropagationPolicy: &orphanPolicy}))
	eventually(t, 30*time.Second, "rc gone, pods orphaned", func() error {
		if _, err := rcs.Get(ctx, "rc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errorf("rc still there: %v", err)
		}
		ps, err := c.activePods("default", "app=rc")
		if err != nil {
			return err
		}
		if len(ps) != 3 {
			return errorf("%d pods left, want 3", len(ps))
		}
		for _, p := range ps {
			if len(p.OwnerReferences) != 0 {
				return errorf("pod %s still owned: %+v", p.Name, p.OwnerReferences)
			}
		}
		return nil
	})

	// A new RC with the same selector adopts them; foreground deletion removes the pods before the RC.
	rc2 := rc.DeepCopy()
	rc2.Name = "rc2"
	three := int32(3)
	rc2.Spec.Replicas = &three
	created2, err := rcs.Create(ctx, rc2, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "orphans adopted by rc2", func() error {
		ps, err := c.activePods("default", "app=rc")
		if err != nil {
			return err
		}
		for _, p := range ps {
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != created2.UID {
				return errorf("pod %s owner %+v", p.Name, p.OwnerReferences)
			}
		}
		for _, p := range pods {
			if _, err := c.Client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
				return errorf("orphan %s: %v (adoption must keep it)", p.Name, err)
			}
		}
		return nil
	})
	fg := metav1.DeletePropagationForeground
	must(t, rcs.Delete(ctx, "rc2", metav1.DeleteOptions{PropagationPolicy: &fg}))
	eventually(t, 60*time.Second, "foreground deletion", func() error {
		_, gerr := rcs.Get(ctx, "rc2", metav1.GetOptions{})
		ps, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=rc"})
		if err != nil {
			return err
		}
		if len(ps.Items) > 0 && apierrors.IsNotFound(gerr) {
			t.Fatalf("rc2 removed while %d of its pods remain (foreground deletion waits for them)", len(ps.Items))
		}
		if !apierrors.IsNotFound(gerr) || len(ps.Items) > 0 {
			return errorf("rc2: %v, %d pods", gerr, len(ps.Items))
		}
		return nil
	})
	// The released pod was never the RC's again.
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, released, metav1.GetOptions{}); err != nil {
		t.Errorf("released pod %s: %v (it left the selector, so no deletion may reach it)", released, err)
	}
}
