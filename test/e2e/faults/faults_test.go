package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/examples"
)

// stallFor is the agent stall of TestAgentStall (the acceptance's 60 s; NODEKIT_FAULT_STALL overrides).
func stallFor(t *testing.T) time.Duration {
	if s := os.Getenv("NODEKIT_FAULT_STALL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("NODEKIT_FAULT_STALL=%q: %v", s, err)
		}
		return d
	}
	return 60 * time.Second
}

// TestAgentStall: SIGSTOP the agent (kubelet and proxy) for 60 s, past the node monitor's 40 s grace,
// so the node goes Unknown and its pods Ready=False; after SIGCONT the Service answers again within 15 s
// and keeps answering (the acceptance), the pods are Ready again, and nothing leaked.
func TestAgentStall(t *testing.T) {
	e := cluster1(t)
	e.waitDemoReady(t, 3*time.Minute)
	agentPID := e.pid(t, "agent")
	stall := stallFor(t)

	p := e.probe()
	start := time.Now()
	e.signal(t, "agent", agentPID, syscall.SIGSTOP)
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(agentPID, syscall.SIGCONT)
		}
	}()
	// While stopped: the node lifecycle controller sees the node go silent.
	unknownAt := time.Duration(0)
	for time.Since(start) < stall {
		if unknownAt == 0 {
			if n, err := e.client.CoreV1().Nodes().Get(context.Background(), e.nodeName, metav1.GetOptions{}); err == nil {
				if c := nodeCondition(n, v1.NodeReady); c != nil && c.Status == v1.ConditionUnknown {
					unknownAt = time.Since(start)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	notReady := 0
	if l, err := e.client.CoreV1().Pods(examples.DemoNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: demoSelector}); err == nil {
		for _, p := range l.Items {
			if !podReady(&p) {
				notReady++
			}
		}
	}
	e.signal(t, "agent", agentPID, syscall.SIGCONT)
	resumed = true
	end := time.Now()
	t.Logf("stalled %s: node Unknown after %.1fs, %d of 3 demo pods Ready=False at resume", stall, unknownAt.Seconds(), notReady)
	if stall >= 50*time.Second && (unknownAt == 0 || notReady == 0) {
		t.Errorf("the %s stall did not bite: node Unknown after %s, %d pods Ready=False (want the node Unknown and the pods marked)", stall, unknownAt, notReady)
	}

	// The Service answers within 15 s of the resume; the probe runs 15 s more to see it keeps answering.
	e.waitDemoReady(t, 2*time.Minute)
	for time.Since(end) < 30*time.Second {
		time.Sleep(time.Second)
	}
	f := p.stop(start, end)
	t.Logf("FIGURE agent SIGSTOP %s then SIGCONT: %s", stall, f)
	if f.recovery > 15*time.Second {
		t.Errorf("the Service answered again %.1fs after the resume, want within 15s", f.recovery.Seconds())
	}
	if f.after == 0 || f.afterOK == 0 {
		t.Errorf("no answered request after the resume: %s", f)
	}
	e.assertNoLeaks(t)
}

// TestAgentKillNoReadyFlap: kill -9 the agent (its managed containerd stops with it; the shims and the
// containers keep running); `up` restarts it, and a watch on the demo pods started before the kill sees
// no pod with Ready other than True until the new agent has synced every pod (the acceptance); the
// Service keeps answering.
func TestAgentKillNoReadyFlap(t *testing.T) {
	e := cluster1(t)
	before := e.waitDemoReady(t, 3*time.Minute)
	agentPID := e.pid(t, "agent")

	rw := e.watchReady(t)
	p := e.probe()
	start := time.Now()
	e.signal(t, "agent", agentPID, syscall.SIGKILL)
	newPID := e.waitRestarted(t, "agent", agentPID, 2*time.Minute)
	end := time.Now()
	t.Logf("agent restarted as pid %d after %.1fs", newPID, end.Sub(start).Seconds())
	// The new agent heartbeats (the node's lease renewed after the restart) and resyncs its pods; the
	// watch then keeps looking for 20 s more.
	e.waitFor(t, 2*time.Minute, "the restarted agent's lease renewal", func() (bool, string) {
		l, err := e.client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), e.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(end), fmt.Sprintf("renewed %v", l.Spec.RenewTime)
	})
	after := e.waitDemoReady(t, 2*time.Minute)
	for time.Since(end) < 20*time.Second {
		time.Sleep(time.Second)
	}
	flaps := rw.stop()
	f := p.stop(start, end)
	t.Logf("FIGURE agent kill -9 (restart %.1fs): %s; Ready flaps seen by the watch: %d", end.Sub(start).Seconds(), f, len(flaps))
	if len(flaps) > 0 {
		t.Errorf("a watch saw demo pods not Ready across the agent restart:\n%s", strings.Join(flaps, "\n"))
	}
	samePods(t, before, after)
	if f.afterOK != f.after || f.duringOK != f.during {
		t.Errorf("Service requests failed across the agent restart: %s", f)
	}
	e.assertNoLeaks(t)
}

// samePods asserts that the demo pods are the same (UIDs) and none of their containers restarted.
func samePods(t *testing.T, before, after []v1.Pod) {
	t.Helper()
	restarts := func(p v1.Pod) (n int32) {
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
		return n
	}
	was := map[string]int32{}
	for _, p := range before {
		was[string(p.UID)] = restarts(p)
	}
	for _, p := range after {
		r, ok := was[string(p.UID)]
		if !ok {
			t.Errorf("demo pod %s (%s) is new: the fault replaced a pod", p.Name, p.UID)
		} else if restarts(p) != r {
			t.Errorf("demo pod %s: restartCount %d, was %d: the fault restarted its container", p.Name, restarts(p), r)
		}
	}
}

// TestContainerdKill: kill -9 the agent's containerd; the agent's supervisor restarts it, the containers
// keep running under their shims (same pods, no container restart), the Service keeps answering.
func TestContainerdKill(t *testing.T) {
	all(t)
	e := cluster1(t)
	before := e.waitDemoReady(t, 3*time.Minute)
	pid := e.pid(t, "containerd")
	p := e.probe()
	start := time.Now()
	e.signal(t, "containerd", pid, syscall.SIGKILL)
	e.waitRestarted(t, "containerd", pid, 2*time.Minute)
	end := time.Now()
	after := e.waitDemoReady(t, 2*time.Minute)
	for time.Since(end) < 15*time.Second {
		time.Sleep(time.Second)
	}
	f := p.stop(start, end)
	t.Logf("FIGURE containerd kill -9 (restart %.1fs): %s", end.Sub(start).Seconds(), f)
	samePods(t, before, after)
	if f.afterOK != f.after {
		t.Errorf("Service requests failed after containerd came back: %s", f)
	}
	e.assertNoLeaks(t)
}

// TestServerKillDuringWrites: kill -9 the API server (with its embedded etcd) while a writer creates
// ConfigMaps; `up` restarts it; every write the server acknowledged is there afterwards, writes succeed
// again, and the Service (served by the node, not the control plane) keeps answering throughout.
func TestServerKillDuringWrites(t *testing.T) {
	all(t)
	e := cluster1(t)
	e.waitDemoReady(t, 3*time.Minute)
	ns := examples.DemoNamespace
	label := "nodekit-fault=writes"
	ctx := context.Background()
	defer func() {
		_ = e.client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label})
	}()

	var mu sync.Mutex
	var acked []string
	failed, firstOKAfterKill := 0, time.Time{}
	var killedAt time.Time
	stopw := make(chan struct{})
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		for i := 0; ; i++ {
			select {
			case <-stopw:
				return
			default:
			}
			name := "fault-w-" + strconv.Itoa(i)
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := e.client.CoreV1().ConfigMaps(ns).Create(cctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nodekit-fault": "writes"}},
				Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
			cancel()
			mu.Lock()
			if err == nil {
				acked = append(acked, name)
				if !killedAt.IsZero() && firstOKAfterKill.IsZero() {
					firstOKAfterKill = time.Now()
				}
			} else {
				failed++
				time.Sleep(100 * time.Millisecond)
			}
			mu.Unlock()
		}
	}()
	e.waitFor(t, time.Minute, "20 acknowledged writes", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 20, fmt.Sprintf("%d acked", len(acked))
	})
	pid := e.pid(t, "server")
	p := e.probe()
	start := time.Now()
	mu.Lock()
	killedAt = start
	mu.Unlock()
	e.signal(t, "server", pid, syscall.SIGKILL)
	e.waitRestarted(t, "server", pid, 2*time.Minute)
	e.waitFor(t, 3*time.Minute, "a write acknowledged after the kill", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return !firstOKAfterKill.IsZero(), fmt.Sprintf("%d writes failed", failed)
	})
	end := time.Now()
	close(stopw)
	<-wdone
	e.waitDemoReady(t, 2*time.Minute)
	f := p.stop(start, end)
	mu.Lock()
	t.Logf("FIGURE API server kill -9 during writes: writes again after %.1fs (%d acknowledged, %d failed); Service %s",
		firstOKAfterKill.Sub(start).Seconds(), len(acked), failed, f)
	names := append([]string(nil), acked...)
	mu.Unlock()
	l, err := e.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, c := range l.Items {
		have[c.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			t.Errorf("ConfigMap %s was acknowledged but is gone after the server's kill -9", n)
		}
	}
	if f.duringOK != f.during || f.afterOK != f.after {
		t.Errorf("the Service failed requests while the control plane was down: %s", f)
	}
	e.assertNoLeaks(t)
}

// TestNodeReboot simulates a node reboot of the node's own processes: the agent and its containerd
// killed together (-9), the shims left running; `up` restarts the agent, which restarts containerd; the
// same pods come back Ready, the Service answers again, and nothing leaked.
func TestNodeReboot(t *testing.T) {
	all(t)
	e := cluster1(t)
	before := e.waitDemoReady(t, 3*time.Minute)
	agentPID, ctrdPID := e.pid(t, "agent"), e.pid(t, "containerd")
	shims := len(e.procs("shim"))
	p := e.probe()
	start := time.Now()
	e.signal(t, "containerd", ctrdPID, syscall.SIGKILL)
	e.signal(t, "agent", agentPID, syscall.SIGKILL)
	e.waitRestarted(t, "agent", agentPID, 2*time.Minute)
	e.waitRestarted(t, "containerd", ctrdPID, 2*time.Minute)
	end := time.Now()
	after := e.waitDemoReady(t, 3*time.Minute)
	for time.Since(end) < 15*time.Second {
		time.Sleep(time.Second)
	}
	f := p.stop(start, end)
	t.Logf("FIGURE node reboot (agent + containerd kill -9, %d shims left; back after %.1fs): %s", shims, end.Sub(start).Seconds(), f)
	samePods(t, before, after)
	e.assertNoLeaks(t)
}

// TestPodCycles creates and deletes pods NODEKIT_FAULT_CYCLES times (default 5; `make faults`: 1000),
// two at a time, each waited to Running and then to gone, bounded by NODEKIT_FAULT_CYCLE_TIME (default
// 10 m); the demo Service keeps answering and nothing leaks.
func TestPodCycles(t *testing.T) {
	e := cluster1(t)
	n := 5
	if s := os.Getenv("NODEKIT_FAULT_CYCLES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("NODEKIT_FAULT_CYCLES=%q: want a positive count", s)
		}
		n = v
	}
	budget := 10 * time.Minute
	if s := os.Getenv("NODEKIT_FAULT_CYCLE_TIME"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("NODEKIT_FAULT_CYCLE_TIME=%q: %v", s, err)
		}
		budget = d
	}
	e.waitDemoReady(t, 3*time.Minute)
	ctx := context.Background()
	ns := examples.DemoNamespace
	p := e.probe()
	start := time.Now()
	var mu sync.Mutex
	done, next := 0, 0
	var errs []string
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= n || time.Since(start) > budget || len(errs) > 0 {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := e.cycle(ctx, ns, fmt.Sprintf("fault-cycle-%d", i)); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	f := p.stop(start, end)
	per := end.Sub(start) / time.Duration(max(done, 1))
	t.Logf("FIGURE %d pod create/delete cycles in %.1fs (%.2fs per cycle, 2 in parallel): Service %s", done, end.Sub(start).Seconds(), per.Seconds(), f)
	if len(errs) > 0 {
		e.dumpLogs(t)
		t.Fatalf("cycle failed: %s", strings.Join(errs, "; "))
	}
	if done < n {
		t.Errorf("%d of %d cycles within the %s budget", done, n, budget)
	}
	if f.duringOK != f.during {
		t.Errorf("the demo Service failed requests during the pod cycles: %s", f)
	}
	e.assertNoLeaks(t)
}

// cycle creates one pod of the demo image, waits for it Running with an IP, deletes it and waits until it
// is gone from the API (the kubelet confirmed the containers stopped).
func (e *env) cycle(ctx context.Context, ns, name string) error {
	zero := int64(1)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nodekit-fault": "cycle"}},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &zero, Containers: []v1.Container{{Name: "c", Image: "nodekit.local/demo-server:v1", ImagePullPolicy: v1.PullIfNotPresent}}}}
	if _, err := e.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %v", name, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" {
			break
		}
		if err == nil && (p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded) {
			return fmt.Errorf("pod %s ended %s: %v", name, p.Status.Phase, p.Status.ContainerStatuses)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s not Running within 3m: %v %v", name, err, p.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := e.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete %s: %v", name, err)
	}
	deadline = time.Now().Add(3 * time.Minute)
	for {
		_, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s still in the API 3m after its delete (%v)", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
