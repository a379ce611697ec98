package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeCluster returns a fake clientset whose pods/binding subresource sets spec.nodeName, as the API
// server does, and starts a scheduler on it for the test's lifetime.
func fakeCluster(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := action.(k8stesting.CreateAction).GetObject().(*v1.Binding)
		gvr := v1.SchemeGroupVersion.WithResource("pods")
		obj, err := client.Tracker().Get(gvr, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*v1.Pod).DeepCopy()
		p.Spec.NodeName = b.Target.Name
		return true, b, client.Tracker().Update(gvr, p, b.Namespace)
	})
	s, err := New(client, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return client
}

func waitPod(t *testing.T, client *fake.Clientset, name string, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: timed out waiting for %s; last: %+v err=%v", name, what, p, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func scheduledCondition(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestUnschedulableMessageThenRetryOnNodeAdd(t *testing.T) {
	tainted := node("n3", "8", "8Gi", func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: "key", Value: "value", Effect: v1.TaintEffectNoSchedule}}
	})
	client := fakeCluster(t, node("n1", "1", "4Gi"), node("n2", "1", "4Gi"), tainted, pod("big", "2", "1Gi"))

	p := waitPod(t, client, "big", "PodScheduled=False", func(p *v1.Pod) bool { return scheduledCondition(p) != nil })
	c := scheduledCondition(p)
	want := "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {key: value}." +
		" preemption: 0/3 nodes are available: 2 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
	if c.Status != v1.ConditionFalse || c.Reason != v1.PodReasonUnschedulable || c.Message != want {
		t.Fatalf("condition = %s/%s %q, want False/Unschedulable %q", c.Status, c.Reason, c.Message, want)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("unschedulable pod bound to %q", p.Spec.NodeName)
	}

	// A node that fits appears: the parked pod is retried and bound there.
	if _, err := client.CoreV1().Nodes().Create(context.Background(), node("n4", "4", "4Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, client, "big", "binding", func(p *v1.Pod) bool { return p.Spec.NodeName != "" })
	if p.Spec.NodeName != "n4" {
		t.Fatalf("bound to %q, want n4", p.Spec.NodeName)
	}
}

func TestRetryWhenBoundPodDeleted(t *testing.T) {
	client := fakeCluster(t, node("n1", "1", "4Gi"), pod("hog", "800m", "", boundTo("n1")), pod("next", "500m", ""))
	waitPod(t, client, "next", "PodScheduled=False", func(p *v1.Pod) bool { return scheduledCondition(p) != nil })
	if err := client.CoreV1().Pods("default").Delete(context.Background(), "hog", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := waitPod(t, client, "next", "binding", func(p *v1.Pod) bool { return p.Spec.NodeName != "" }); p.Spec.NodeName != "n1" {
		t.Fatalf("bound to %q, want n1", p.Spec.NodeName)
	}
}

func TestCustomSchedulerPodStaysPending(t *testing.T) {
	custom := pod("custom", "100m", "", func(p *v1.Pod) { p.Spec.SchedulerName = "my-custom-scheduler" })
	client := fakeCluster(t, node("n1", "4", "4Gi"), custom)
	// A default-scheduler pod created afterwards gets bound, so the scheduler has seen both.
	if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod("ours", "100m", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, client, "ours", "binding", func(p *v1.Pod) bool { return p.Spec.NodeName == "n1" })
	time.Sleep(200 * time.Millisecond)
	p, err := client.CoreV1().Pods("default").Get(context.Background(), "custom", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" || scheduledCondition(p) != nil {
		t.Fatalf("custom-scheduler pod touched: nodeName=%q conditions=%v", p.Spec.NodeName, p.Status.Conditions)
	}
	for _, a := range client.Actions() {
		if a.GetSubresource() == "binding" && a.(k8stesting.CreateAction).GetObject().(*v1.Binding).Name == "custom" {
			t.Fatal("default scheduler posted a binding for the custom-scheduler pod")
		}
	}
}

// TestPodAffinityWaiterRetriedWhenMatchingPodBinds: a pod whose required affinity no pod satisfies is
// parked with upstream's reason and retried (without the periodic retry, an hour here) when a pod it
// needs is bound.
func TestPodAffinityWaiterRetriedWhenMatchingPodBinds(t *testing.T) {
	web := pod("web", "", "", requiredAffinity(term(v1.LabelHostname, "app", "db")))
	client := fakeCluster(t, node("n1", "1", "4Gi"), node("n2", "1", "4Gi"), web)
	p := waitPod(t, client, "web", "PodScheduled=False", func(p *v1.Pod) bool { return scheduledCondition(p) != nil })
	if c, want := scheduledCondition(p), "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."+
		" preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."; c.Message != want {
		t.Fatalf("message = %q, want %q", c.Message, want)
	}
	db := pod("db", "100m", "", withLabels("app", "db"), boundTo("n2"))
	if _, err := client.CoreV1().Pods("default").Create(context.Background(), db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := waitPod(t, client, "web", "binding", func(p *v1.Pod) bool { return p.Spec.NodeName != "" }); p.Spec.NodeName != "n2" {
		t.Fatalf("web bound to %q, want n2 (the db's node)", p.Spec.NodeName)
	}
}

// TestGatedPodWaitsForGateRemoval checks a pod with scheduling gates is left alone (not bound, no
// status written) while a later pod is bound, and that the update removing its last gate queues it
// at once (the retry interval here is an hour).
func TestGatedPodWaitsForGateRemoval(t *testing.T) {
	gated := pod("gated", "100m", "", func(p *v1.Pod) {
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/b"}}
	})
	client := fakeCluster(t, node("n1", "1", "4Gi"), gated)
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(context.Background(), pod("later", "100m", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, client, "later", "binding", func(p *v1.Pod) bool { return p.Spec.NodeName == "n1" })

	removeGate := func() *v1.Pod {
		p, err := pods.Get(context.Background(), "gated", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" || scheduledCondition(p) != nil {
			t.Fatalf("gated pod touched by the scheduler: nodeName %q, condition %+v", p.Spec.NodeName, scheduledCondition(p))
		}
		p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:]
		p, err = pods.Update(context.Background(), p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// One gate left: still not scheduled. "probe" is created after the update, and bound, so the
	// scheduler has seen the update by then.
	removeGate()
	if _, err := pods.Create(context.Background(), pod("probe", "100m", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, client, "probe", "binding", func(p *v1.Pod) bool { return p.Spec.NodeName == "n1" })
	removeGate()
	waitPod(t, client, "gated", "binding", func(p *v1.Pod) bool { return p.Spec.NodeName == "n1" })
}
