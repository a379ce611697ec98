package status

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

const gate = v1.PodConditionType("example.com/gate")

// readyPod is a pod in the API with one running container and the kubelet's conditions True.
func readyPod() (*v1.Pod, v1.PodStatus) {
	at := metav1.NewTime(time.Unix(1000, 0))
	s := v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.5", QOSClass: v1.PodQOSBestEffort,
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, ContainerID: "containerd://abc",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at}}}}}
	for _, t := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady, v1.PodScheduled} {
		s.Conditions = append(s.Conditions, v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastTransitionTime: at})
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"}, Spec: v1.PodSpec{NodeName: "n"}}
	return pod, s
}

func patches(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// markNotReady does what the node lifecycle controller does to the pods of a silent node: Ready=False,
// reason NodeNotReady, through UpdateStatus; and another writer adds a readiness gate condition.
func markNotReady(t *testing.T, c *fake.Clientset) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodReady {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = v1.ConditionFalse, "NodeNotReady"
			p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(time.Unix(2000, 0))
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: gate, Status: v1.ConditionTrue})
	p, err = c.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestReconcileRewritesOverwrittenStatus: a Ready=False written by someone else over the kubelet's
// Ready=True is written back (with the kubelet's transition time), the other writer's own condition is
// kept, and a second Reconcile of the converged pod writes nothing.
func TestReconcileRewritesOverwrittenStatus(t *testing.T) {
	pod, s := readyPod()
	c := fake.NewSimpleClientset(pod)
	m := NewManager(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	if err := m.SetPodStatus(ctx, pod, s); err != nil {
		t.Fatal(err)
	}
	if got := patches(c); got != 1 {
		t.Fatalf("first status: %d patches, want 1", got)
	}
	// Unchanged status, unchanged API: nothing to do.
	if wrote, err := m.Reconcile(ctx, pod.UID, mustGet(t, c)); err != nil || wrote {
		t.Fatalf("Reconcile of an up-to-date pod: wrote=%v err=%v", wrote, err)
	}
	api := markNotReady(t, c)
	// SetPodStatus compares with its cache only: the same status again is not written.
	if err := m.SetPodStatus(ctx, pod, s); err != nil || patches(c) != 1 {
		t.Fatalf("SetPodStatus of an unchanged status wrote (%d patches, err %v)", patches(c), err)
	}
	wrote, err := m.Reconcile(ctx, pod.UID, api)
	if err != nil || !wrote {
		t.Fatalf("Reconcile of an overwritten status: wrote=%v err=%v", wrote, err)
	}
	got := mustGet(t, c)
	rc := podCondition(got, v1.PodReady)
	if rc == nil || rc.Status != v1.ConditionTrue || rc.Reason != "" || !rc.LastTransitionTime.Equal(&metav1.Time{Time: time.Unix(1000, 0)}) {
		t.Fatalf("Ready after reconcile = %+v, want True since 1000", rc)
	}
	if g := podCondition(got, gate); g == nil || g.Status != v1.ConditionTrue {
		t.Fatalf("the readiness gate condition of another writer was dropped: %+v", got.Status.Conditions)
	}
	if wrote, err := m.Reconcile(ctx, pod.UID, got); err != nil || wrote {
		t.Fatalf("Reconcile after convergence: wrote=%v err=%v", wrote, err)
	}
	// Unknown pods are left alone.
	if wrote, _ := m.Reconcile(ctx, types.UID("other"), got); wrote {
		t.Fatal("Reconcile wrote a pod without a cached status")
	}
}

// TestRunReconcilesPeriodically: Run finds and fixes an overwritten status within one period without a
// Notify, and at once on Notify.
func TestRunReconcilesPeriodically(t *testing.T) {
	pod, s := readyPod()
	c := fake.NewSimpleClientset(pod)
	m := NewManager(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.SetPodStatus(ctx, pod, s); err != nil {
		t.Fatal(err)
	}
	apiPod := func(uid types.UID) *v1.Pod {
		if uid != pod.UID {
			return nil
		}
		p, _ := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		return p
	}
	done := make(chan struct{})
	const period = 200 * time.Millisecond
	go func() { defer close(done); m.Run(ctx, period, apiPod) }()
	waitReady := func(within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if rc := podCondition(mustGet(t, c), v1.PodReady); rc != nil && rc.Status == v1.ConditionTrue {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("Ready not restored within %v", within)
	}
	markNotReady(t, c)
	waitReady(2 * period)
	cancel()
	<-done

	// On Notify it does not wait for the tick.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	m2 := NewManager(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := m2.SetPodStatus(ctx, pod, s); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() { defer close(done); m2.Run(ctx, time.Hour, apiPod) }()
	markNotReady(t, c)
	m2.Notify(pod.UID)
	waitReady(time.Second)
	cancel()
	<-done
}

func mustGet(t *testing.T, c *fake.Clientset) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
