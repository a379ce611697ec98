package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// testPriorityAndPreemption runs in TestSchedulingGatesAndSchedulingValidation's cluster (after its
// own checks, since it adds a node): PriorityClass validation and the bootstrap classes, the Priority
// admission plugin, and preemption on a full one-cpu node — a preemptionPolicy Never pod stays
// Pending, a higher-priority pod gets the low one preempted (DisruptionTarget, Preempted event,
// nominatedNodeName) and lands on the node, and the Never pod does not take the room made for it.
func testPriorityAndPreemption(t *testing.T, c *cluster, ns string) {
	ctx := context.Background()
	pcs := c.Client.SchedulingV1().PriorityClasses()
	pods := c.Client.CoreV1().Pods(ns)
	class := func(name string, value int32, mutate func(*schedulingv1.PriorityClass)) *schedulingv1.PriorityClass {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if mutate != nil {
			mutate(pc)
		}
		return pc
	}
	create := func(pc *schedulingv1.PriorityClass) {
		t.Helper()
		must(t, errOf(pcs.Create(ctx, pc, metav1.CreateOptions{})))
		t.Cleanup(func() { _ = pcs.Delete(context.Background(), pc.Name, metav1.DeleteOptions{}) })
	}

	t.Run("bootstrap classes and validation", func(t *testing.T) {
		for name, want := range map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000} {
			pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
			must(t, err)
			if pc.Value != want || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != v1.PreemptLowerPriority {
				t.Errorf("%s: value %d policy %v, want %d PreemptLowerPriority", name, pc.Value, pc.PreemptionPolicy, want)
			}
		}
		_, err := pcs.Create(ctx, class("too-high", 1000000001, nil), metav1.CreateOptions{})
		wantInvalid(t, err, "value", "maximum allowed value of a user defined priority is 1000000000")
		_, err = pcs.Create(ctx, class("system-mine", 5, nil), metav1.CreateOptions{})
		wantInvalid(t, err, "metadata.name", "priority class names with 'system-' prefix are reserved for system use only")
		create(class("prio-low", 10, nil))
		pc, err := pcs.Get(ctx, "prio-low", metav1.GetOptions{})
		must(t, err)
		pc.Value = 11
		_, err = pcs.Update(ctx, pc, metav1.UpdateOptions{})
		wantInvalid(t, err, "value", "may not be changed in an update.")
	})

	t.Run("one globalDefault, used for pods without a class", func(t *testing.T) {
		create(class("prio-default", 7, func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true }))
		_, err := pcs.Create(ctx, class("prio-default-2", 8, func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true }), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PriorityClass prio-default is already marked as default. Only one default can exist") {
			t.Fatalf("second globalDefault: %v", err)
		}
		p, err := pods.Create(ctx, testPod(ns, "defaulted", nil, nil), metav1.CreateOptions{})
		must(t, err)
		if p.Spec.PriorityClassName != "prio-default" || p.Spec.Priority == nil || *p.Spec.Priority != 7 {
			t.Fatalf("defaulted pod: class %q priority %v, want prio-default 7", p.Spec.PriorityClassName, p.Spec.Priority)
		}
		must(t, pcs.Delete(ctx, "prio-default", metav1.DeleteOptions{}))
	})

	t.Run("admission resolves and checks spec.priority", func(t *testing.T) {
		p, err := pods.Create(ctx, testPod(ns, "low-resolved", nil, func(s *v1.PodSpec) { s.PriorityClassName = "prio-low" }), metav1.CreateOptions{})
		must(t, err)
		if p.Spec.Priority == nil || *p.Spec.Priority != 10 || p.Spec.PreemptionPolicy == nil || *p.Spec.PreemptionPolicy != v1.PreemptLowerPriority {
			t.Fatalf("priority %v policy %v, want 10 PreemptLowerPriority", p.Spec.Priority, p.Spec.PreemptionPolicy)
		}
		_, err = pods.Create(ctx, testPod(ns, "missing-class", nil, func(s *v1.PodSpec) { s.PriorityClassName = "nope" }), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no PriorityClass with name nope was found") {
			t.Fatalf("missing class: %v", err)
		}
		_, err = pods.Create(ctx, testPod(ns, "own-priority", nil, func(s *v1.PodSpec) {
			s.PriorityClassName, s.Priority = "prio-low", new(int32(99))
		}), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "the integer value of priority (99) must not be provided in pod spec; priority admission controller computed 10") {
			t.Fatalf("own priority: %v", err)
		}
		// A pod's own preemptionPolicy meets admission first (it must match its class's); a template's
		// meets validation.
		d := demoDeployment("bad-policy", 1, "demo:v1")
		d.Namespace = ns
		d.Spec.Template.Spec.PreemptionPolicy = new(v1.PreemptionPolicy("Sometimes"))
		_, err = c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		wantInvalid(t, err, "spec.template.spec.preemptionPolicy", `Unsupported value: "Sometimes"`)
	})

	t.Run("preemption on a full node", func(t *testing.T) {
		create(class("prio-high", 1000, nil))
		create(class("prio-high-never", 1000, func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = new(v1.PreemptNever) }))
		c.addNode("p-1", "1", "2Gi")
		onP1 := func(name, class string) *v1.Pod {
			return testPod(ns, name, nil, func(s *v1.PodSpec) {
				s.PriorityClassName = class
				s.NodeSelector = map[string]string{v1.LabelHostname: "p-1"}
				s.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("800m")}
			})
		}
		must(t, errOf(pods.Create(ctx, onP1("victim", "prio-low"), metav1.CreateOptions{})))
		waitBound(t, c, ns, "victim")
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "victim").String()})
		must(t, err)
		defer w.Stop()

		// Never preempts: Pending with upstream's PostFilter message, the victim untouched.
		must(t, errOf(pods.Create(ctx, onP1("never", "prio-high-never"), metav1.CreateOptions{})))
		waitUnschedulable(t, c, ns, "never", "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."+
			" not eligible due to preemptionPolicy=Never.")

		start := time.Now()
		pre, err := pods.Create(ctx, onP1("preemptor", "prio-high"), metav1.CreateOptions{})
		must(t, err)
		var marked bool
		deadline := time.After(30 * time.Second)
	watching:
		for {
			select {
			case ev := <-w.ResultChan():
				p, ok := ev.Object.(*v1.Pod)
				if !ok {
					t.Fatalf("victim watch: %v", ev.Object)
				}
				if cond := podCondition(p, v1.DisruptionTarget); cond != nil && cond.Status == v1.ConditionTrue &&
					cond.Reason == v1.PodReasonPreemptionByScheduler && cond.Message == "default-scheduler: preempting to accommodate a higher priority pod" {
					marked = true
				}
				if ev.Type == watch.Deleted {
					break watching
				}
			case <-deadline:
				t.Fatal("victim not deleted within 30s")
			}
		}
		if !marked {
			t.Error("victim never carried DisruptionTarget=True/PreemptionByScheduler")
		}
		if node := waitBound(t, c, ns, "preemptor"); node != "p-1" {
			t.Fatalf("preemptor on %q, want p-1", node)
		}
		t.Logf("preemptor bound %v after creation", time.Since(start))
		got, err := pods.Get(ctx, "preemptor", metav1.GetOptions{})
		must(t, err)
		if got.Status.NominatedNodeName != "p-1" {
			t.Errorf("preemptor nominatedNodeName %q, want p-1", got.Status.NominatedNodeName)
		}
		eventually(t, 10*time.Second, "Preempted event on the victim", func() error {
			evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=victim,reason=Preempted"})
			if err != nil {
				return err
			}
			want := "Preempted by pod " + string(pre.UID) + " on node p-1"
			for _, e := range evs.Items {
				if e.Message == want {
					return nil
				}
			}
			return errorf("events %+v, want %q", evs.Items, want)
		})
		never, err := pods.Get(ctx, "never", metav1.GetOptions{})
		must(t, err)
		if never.Spec.NodeName != "" {
			t.Errorf("the Never pod took the preemptor's room on %q", never.Spec.NodeName)
		}
		must(t, pods.Delete(ctx, "never", metav1.DeleteOptions{}))
	})
}
