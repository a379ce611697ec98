package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSchedulingGatesAndSchedulingValidation runs the scheduler against the API server with one node:
// a pod created with a scheduling gate stays unbound with PodScheduled=False/SchedulingGated, adding
// a gate on update is refused with upstream's message, removing the last gate gets the pod bound at
// once (well inside the scheduler's 5 s retry interval: the update event queues it), a pod naming a
// node while gated is refused, a topology spread constraint with maxSkew 0 is refused with a 422
// naming the field, and matchLabelKeys are merged into the stored labelSelector at creation; then
// priority classes, the Priority admission plugin and preemption (testPriorityAndPreemption).
func TestSchedulingGatesAndSchedulingValidation(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.addNode("g-1", "4", "8Gi")
	ns := c.namespace("gates")
	pods := c.Client.CoreV1().Pods(ns)

	gated := testPod(ns, "gated", map[string]string{"app": "gated"}, func(s *v1.PodSpec) {
		s.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/quota"}}
	})
	created, err := pods.Create(ctx, gated, metav1.CreateOptions{})
	must(t, err)
	cond := podCondition(created, v1.PodScheduled)
	if cond == nil || cond.Status != v1.ConditionFalse || cond.Reason != v1.PodReasonSchedulingGated ||
		cond.Message != "Scheduling is blocked due to non-empty scheduling gates" {
		t.Fatalf("created gated pod: PodScheduled condition %+v, want False/SchedulingGated", cond)
	}

	// A control pod created after the gated one is bound: the scheduler runs, and has seen the gated
	// pod before it (informer order), yet left it alone.
	must(t, errOf(pods.Create(ctx, testPod(ns, "control", nil, nil), metav1.CreateOptions{})))
	waitBound(t, c, ns, "control")
	p, err := pods.Get(ctx, "gated", metav1.GetOptions{})
	must(t, err)
	if p.Spec.NodeName != "" {
		t.Fatalf("gated pod bound to %q", p.Spec.NodeName)
	}
	if cond := podCondition(p, v1.PodScheduled); cond == nil || cond.Reason != v1.PodReasonSchedulingGated {
		t.Fatalf("gated pod condition changed to %+v", cond)
	}

	t.Run("adding a gate on update is refused", func(t *testing.T) {
		p := p.DeepCopy()
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: "example.com/late"})
		_, err := pods.Update(ctx, p, metav1.UpdateOptions{})
		wantInvalid(t, err, "spec.schedulingGates[1].name", "only deletion is allowed, but found new scheduling gate 'example.com/late'")
	})

	t.Run("a gated pod may not name a node", func(t *testing.T) {
		bad := testPod(ns, "gated-bound", nil, func(s *v1.PodSpec) {
			s.NodeName = "g-1"
			s.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/quota"}}
		})
		_, err := pods.Create(ctx, bad, metav1.CreateOptions{})
		wantInvalid(t, err, "spec.nodeName", "cannot be set until all schedulingGates have been cleared")
	})

	t.Run("removing the last gate gets the pod bound promptly", func(t *testing.T) {
		p := p.DeepCopy()
		p.Spec.SchedulingGates = nil
		_, err := pods.Update(ctx, p, metav1.UpdateOptions{})
		must(t, err)
		start := time.Now()
		eventually(t, 3*time.Second, "ungated pod bound", func() error {
			got, err := pods.Get(ctx, "gated", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Spec.NodeName != "g-1" {
				return errorf("nodeName %q", got.Spec.NodeName)
			}
			if cond := podCondition(got, v1.PodScheduled); cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != "" {
				return errorf("PodScheduled %+v, want True without reason", cond)
			}
			return nil
		})
		t.Logf("bound %v after the gate was removed", time.Since(start))
	})

	t.Run("maxSkew 0 is refused", func(t *testing.T) {
		bad := testPod(ns, "skew0", map[string]string{"app": "skew"}, func(s *v1.PodSpec) {
			s.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: v1.LabelTopologyZone,
				WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "skew"}}}}
		})
		_, err := pods.Create(ctx, bad, metav1.CreateOptions{})
		wantInvalid(t, err, "spec.topologySpreadConstraints[0].maxSkew", "must be greater than zero")
	})

	t.Run("matchLabelKeys are merged into the labelSelector at creation", func(t *testing.T) {
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "merge"}}
		pod := testPod(ns, "merge", map[string]string{"app": "merge", "rev": "r1"}, func(s *v1.PodSpec) {
			s.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname,
				WhenUnsatisfiable: v1.ScheduleAnyway, LabelSelector: sel.DeepCopy(), MatchLabelKeys: []string{"rev"}}}
			term := v1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: sel.DeepCopy(), MismatchLabelKeys: []string{"rev"}}
			s.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term}}}
		})
		got, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		must(t, err)
		spread := got.Spec.TopologySpreadConstraints[0].LabelSelector.MatchExpressions
		if len(spread) != 1 || spread[0].Key != "rev" || spread[0].Operator != metav1.LabelSelectorOpIn || spread[0].Values[0] != "r1" {
			t.Errorf("spread selector expressions %+v, want rev In (r1)", spread)
		}
		anti := got.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchExpressions
		if len(anti) != 1 || anti[0].Key != "rev" || anti[0].Operator != metav1.LabelSelectorOpNotIn || anti[0].Values[0] != "r1" {
			t.Errorf("anti-affinity selector expressions %+v, want rev NotIn (r1)", anti)
		}
		waitBound(t, c, ns, "merge")
	})

	testPriorityAndPreemption(t, c, ns)
}

func errOf[T any](_ T, err error) error { return err }

// wantInvalid fails unless err is a 422 whose causes name field with a message containing msg.
func wantInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want 422 Invalid on %s", err, field)
	}
	for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
		if cause.Field == field && strings.Contains(cause.Message, msg) {
			return
		}
	}
	t.Fatalf("422 %v does not name %s with %q", err, field, msg)
}
