package nodelifecycle

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestEvictAt(t *testing.T) {
	c := &Controller{}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	added := metav1.NewTime(now.Add(-10 * time.Second))
	unreachable := []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: &added}}
	secs := func(s int64) *int64 { return &s }
	tol := func(sec *int64) v1.Toleration {
		return v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: sec}
	}
	cases := []struct {
		name   string
		tols   []v1.Toleration
		want   time.Time
		wantOK bool
	}{
		{"no toleration: now", nil, now, true},
		{"300 s after the taint", []v1.Toleration{tol(secs(300))}, added.Add(300 * time.Second), true},
		{"forever", []v1.Toleration{tol(nil)}, time.Time{}, false},
		{"shortest bounded wins over forever", []v1.Toleration{tol(nil), tol(secs(60)), tol(secs(30))}, added.Add(30 * time.Second), true},
		{"other key does not match", []v1.Toleration{{Key: "x", Operator: v1.TolerationOpExists}}, now, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.evictAt(&v1.Pod{Spec: v1.PodSpec{Tolerations: tc.tols}}, unreachable, now)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Fatalf("evictAt = %v,%v want %v,%v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestMonitorMarksSilentNodeAndEvicts drives monitor with explicit clock values: a node whose Lease
// stops changing becomes Unknown and tainted after the grace period, and an intolerant pod on it is
// deleted while a tolerating one stays until its tolerationSeconds pass.
func TestMonitorMarksSilentNodeAndEvicts(t *testing.T) {
	start := time.Now()
	renew := metav1.NewMicroTime(start)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(start)}}}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: LeaseNamespace}, Spec: coordinationv1.LeaseSpec{RenewTime: &renew}}
	ready := []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	intolerant := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "intolerant", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{NodeName: "n1"}, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: ready}}
	secs := int64(5)
	patient := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "patient", Namespace: "default", UID: "u2"},
		Spec: v1.PodSpec{NodeName: "n1", Tolerations: []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists,
			Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs}}}, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: ready}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, c := startController(ctx, t, Options{GracePeriod: 40 * time.Second}, node, lease, intolerant, patient)
	sync := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("informer never showed %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	getNode := func() *v1.Node {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	c.monitor(ctx, start)                     // first sight
	c.monitor(ctx, start.Add(30*time.Second)) // within grace
	if rc := readyCondition(getNode()); rc.Status != v1.ConditionTrue {
		t.Fatalf("node marked %s within the grace period", rc.Status)
	}
	c.monitor(ctx, start.Add(41*time.Second))
	n := getNode()
	if rc := readyCondition(n); rc.Status != v1.ConditionUnknown || rc.Reason != "NodeStatusUnknown" {
		t.Fatalf("after grace: Ready = %+v", rc)
	}
	if !hasTaint(n.Spec.Taints, v1.TaintNodeUnreachable, v1.TaintEffectNoExecute) || !hasTaint(n.Spec.Taints, v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule) {
		t.Fatalf("taints = %+v", n.Spec.Taints)
	}
	p, _ := client.CoreV1().Pods("default").Get(ctx, "patient", metav1.GetOptions{})
	if cond := p.Status.Conditions[0]; cond.Status != v1.ConditionFalse {
		t.Fatalf("pod on silent node still Ready: %+v", cond)
	}
	sync("the taint", func() bool { n, _ := c.nodes.Get("n1"); return len(n.Spec.Taints) == 2 })
	taintTime := time.Time{}
	for _, tt := range n.Spec.Taints {
		if tt.Effect == v1.TaintEffectNoExecute {
			taintTime = tt.TimeAdded.Time
		}
	}
	c.monitor(ctx, taintTime.Add(time.Second))
	if _, err := client.CoreV1().Pods("default").Get(ctx, "intolerant", metav1.GetOptions{}); err == nil {
		t.Fatal("intolerant pod not evicted")
	}
	if _, err := client.CoreV1().Pods("default").Get(ctx, "patient", metav1.GetOptions{}); err != nil {
		t.Fatalf("tolerating pod evicted before its tolerationSeconds: %v", err)
	}
	c.monitor(ctx, taintTime.Add(6*time.Second))
	if _, err := client.CoreV1().Pods("default").Get(ctx, "patient", metav1.GetOptions{}); err == nil {
		t.Fatal("tolerating pod not evicted after its tolerationSeconds")
	}

	// The kubelet comes back: Ready=True with a new heartbeat; the taints go.
	back := getNode()
	back.Status.Conditions[0].Status = v1.ConditionTrue
	back.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(start.Add(60 * time.Second))
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sync("Ready=True", func() bool { n, _ := c.nodes.Get("n1"); return readyCondition(n).Status == v1.ConditionTrue })
	c.monitor(ctx, start.Add(61*time.Second))
	if taints := getNode().Spec.Taints; len(taints) != 0 {
		t.Fatalf("taints after recovery = %+v", taints)
	}
}

func TestPodsOfDeletedNodeCollected(t *testing.T) {
	stray := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "default", UID: "u3"}, Spec: v1.PodSpec{NodeName: "gone"}}
	kept := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default", UID: "u4"}, Spec: v1.PodSpec{NodeName: "n1"}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}}}
	client := fake.NewClientset(node, stray, kept)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	c.monitor(ctx, time.Now())
	if _, err := client.CoreV1().Pods("default").Get(ctx, "stray", metav1.GetOptions{}); err == nil {
		t.Fatal("pod bound to a deleted node not collected")
	}
	if _, err := client.CoreV1().Pods("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod on a live node collected: %v", err)
	}
}

func TestPressureTaints(t *testing.T) {
	now := time.Now()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(now)},
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue},
			{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse},
			{Type: v1.NodePIDPressure, Status: v1.ConditionTrue},
		}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, c := startController(ctx, t, Options{GracePeriod: 40 * time.Second}, node)
	keys := func() []string {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tt := range n.Spec.Taints {
			out = append(out, tt.Key+":"+string(tt.Effect))
		}
		return out
	}
	c.monitor(ctx, now)
	want := []string{"dedicated:NoSchedule", v1.TaintNodeMemoryPressure + ":NoSchedule", v1.TaintNodePIDPressure + ":NoSchedule"}
	if got := keys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("taints under memory and PID pressure = %v, want %v", got, want)
	}
	// Memory pressure ends: its taint goes, the others stay.
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n.Status.Conditions[1].Status = v1.ConditionFalse
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, _ := c.nodes.Get("n1")
		if ln != nil && ln.Status.Conditions[1].Status == v1.ConditionFalse {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("informer never showed MemoryPressure=False")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.monitor(ctx, now.Add(time.Second))
	want = []string{"dedicated:NoSchedule", v1.TaintNodePIDPressure + ":NoSchedule"}
	if got := keys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("taints after memory pressure ended = %v, want %v", got, want)
	}
}

// startController runs a Controller on a fake clientset holding objs, with its informers synced.
func startController(ctx context.Context, t *testing.T, opts Options, objs ...runtime.Object) (*fake.Clientset, *Controller) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	return client, c
}
