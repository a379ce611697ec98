package prober

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/kubelet/prober/results"
	"github.com/nodekit/nodekit/probes"
)

// fakeRunner answers each probe (by spec pointer) with a settable result and counts the runs.
type fakeRunner struct {
	mu                    sync.Mutex
	result                map[*v1.Probe]probes.Result
	calls                 map[*v1.Probe]int
	first                 map[*v1.Probe]time.Time
	block                 chan struct{} // when set, Run waits on it (or ctx)
	inFlight, maxInFlight atomic.Int32
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{result: map[*v1.Probe]probes.Result{}, calls: map[*v1.Probe]int{}, first: map[*v1.Probe]time.Time{}}
}

func (f *fakeRunner) set(p *v1.Probe, s probes.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := probes.Result{Status: s}
	if s != probes.Success {
		r.Reason = "canned " + string(s)
	}
	f.result[p] = r
}

func (f *fakeRunner) count(p *v1.Probe) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[p]
}

func (f *fakeRunner) Run(ctx context.Context, p *v1.Probe, t probes.Target) probes.Result {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFlight.Load()
		if n <= m || f.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return probes.Result{Status: probes.Failure, Reason: "cancelled"}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[p]++
	if _, ok := f.first[p]; !ok {
		f.first[p] = time.Now()
	}
	r, ok := f.result[p]
	if !ok {
		return probes.Result{Status: probes.Success}
	}
	return r
}

func probe(period, success, failure int32) *v1.Probe {
	return &v1.Probe{PeriodSeconds: period, SuccessThreshold: success, FailureThreshold: failure, TimeoutSeconds: 1,
		ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
}

var podSeq atomic.Int32

func testPod(liveness, readiness, startup *v1.Probe) *v1.Pod {
	n := podSeq.Add(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('a'+n%26)), Namespace: "default", UID: types.UID("uid-" + time.Now().Format("150405.000000000") + string(rune('a'+n%26)))},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
			Name: "c", LivenessProbe: liveness, ReadinessProbe: readiness, StartupProbe: startup}}},
	}
}

// runningStatus is a pod status with container c running as instance id since startedAt.
func runningStatus(id string, startedAt time.Time) *v1.PodStatus {
	return &v1.PodStatus{PodIP: "10.0.0.5", ContainerStatuses: []v1.ContainerStatus{{
		Name: "c", ContainerID: id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}}}}}
}

// harness holds a manager whose workers are built but not started: the test drives doProbe itself.
type harness struct {
	t       *testing.T
	m       *Manager
	run     *fakeRunner
	rec     *record.FakeRecorder
	pod     *v1.Pod
	workers map[results.ProbeType]*worker
}

func newHarness(t *testing.T, pod *v1.Pod) *harness {
	h := &harness{t: t, run: newFakeRunner(), rec: record.NewFakeRecorder(100), pod: pod, workers: map[results.ProbeType]*worker{}}
	h.m = New(Options{Runner: h.run, Recorder: h.rec})
	h.m.pods[pod.UID] = &podState{pod: pod, containers: map[string]containerState{}}
	c := &pod.Spec.Containers[0]
	for t, spec := range map[results.ProbeType]*v1.Probe{results.Liveness: c.LivenessProbe, results.Readiness: c.ReadinessProbe, results.Startup: c.StartupProbe} {
		if spec != nil {
			w := newWorker(h.m, probeKey{pod.UID, c.Name, t}, pod, c, spec)
			h.m.workers[w.key] = w
			h.workers[t] = w
		}
	}
	return h
}

// status feeds a status through UpdatePodStatus and returns the container's Started and Ready.
func (h *harness) status(s *v1.PodStatus) (started, ready bool) {
	h.m.UpdatePodStatus(h.pod, s)
	cs := s.ContainerStatuses[0]
	return *cs.Started, cs.Ready
}

// probeN runs the worker of type t n times, failing when it wants to stop.
func (h *harness) probeN(t results.ProbeType, n int) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		if !h.workers[t].doProbe() {
			h.t.Fatalf("%s worker stopped", t)
		}
	}
}

// results drains the queued results.
func (h *harness) results() []results.Update {
	var out []results.Update
	for {
		select {
		case r := <-h.m.Results():
			out = append(out, r)
		default:
			return out
		}
	}
}

func TestReadinessThresholds(t *testing.T) {
	rp := probe(1, 2, 3)
	h := newHarness(t, testPod(nil, rp, nil))
	s := runningStatus("containerd://a", time.Now())
	if started, ready := h.status(s); !started || ready {
		t.Fatalf("before any probe: started=%v ready=%v, want started and not ready", started, ready)
	}
	h.probeN(results.Readiness, 1)
	if _, ready := h.status(runningStatus("containerd://a", time.Now())); ready {
		t.Fatal("ready after 1 success with successThreshold 2")
	}
	h.probeN(results.Readiness, 1)
	if _, ready := h.status(runningStatus("containerd://a", time.Now())); !ready {
		t.Fatal("not ready after 2 successes")
	}
	rs := h.results()
	if len(rs) != 1 || rs[0].Result != results.Success || rs[0].Probe != results.Readiness || rs[0].ContainerID != "containerd://a" {
		t.Fatalf("results %+v", rs)
	}
	h.run.set(rp, probes.Failure)
	h.probeN(results.Readiness, 2)
	if _, ready := h.status(runningStatus("containerd://a", time.Now())); !ready {
		t.Fatal("not ready after 2 failures with failureThreshold 3")
	}
	h.probeN(results.Readiness, 1)
	if _, ready := h.status(runningStatus("containerd://a", time.Now())); ready {
		t.Fatal("still ready after 3 failures")
	}
	rs = h.results()
	if len(rs) != 1 || rs[0].Result != results.Failure || rs[0].Message != "Readiness probe failed: canned Failure" {
		t.Fatalf("results %+v", rs)
	}
	// Unknown results (the probe could not run) count neither way.
	h.run.set(rp, probes.Unknown)
	h.probeN(results.Readiness, 5)
	if rs := h.results(); len(rs) != 0 {
		t.Fatalf("unknown results changed state: %+v", rs)
	}
	var unhealthy int
	for len(h.rec.Events) > 0 {
		e := <-h.rec.Events
		if strings.HasPrefix(e, "Warning Unhealthy Readiness probe failed: canned Failure") || strings.HasPrefix(e, "Warning Unhealthy Readiness probe errored: canned Unknown") {
			unhealthy++
		}
	}
	if unhealthy != 8 {
		t.Fatalf("%d Unhealthy events, want one per failed or errored run (8)", unhealthy)
	}
}

func TestLivenessFailureHoldsUntilNewContainer(t *testing.T) {
	lp := probe(1, 1, 3)
	h := newHarness(t, testPod(lp, nil, nil))
	h.status(runningStatus("containerd://a", time.Now()))
	h.run.set(lp, probes.Failure)
	h.probeN(results.Liveness, 3)
	rs := h.results()
	if len(rs) != 1 || rs[0].Result != results.Failure || rs[0].Probe != results.Liveness || rs[0].ContainerID != "containerd://a" ||
		rs[0].Message != "Liveness probe failed: canned Failure" {
		t.Fatalf("results %+v", rs)
	}
	h.probeN(results.Liveness, 5)
	if n := h.run.count(lp); n != 3 {
		t.Fatalf("%d runs: an instance that failed liveness must not be probed again", n)
	}
	// The restarted container is a new instance, probed afresh.
	h.run.set(lp, probes.Success)
	h.status(runningStatus("containerd://b", time.Now()))
	h.probeN(results.Liveness, 1)
	if n := h.run.count(lp); n != 4 {
		t.Fatalf("new container not probed (%d runs)", n)
	}
	if rs := h.results(); len(rs) != 0 {
		t.Fatalf("a healthy new container is no news: %+v", rs)
	}
	if _, stale := h.m.results.Get("containerd://a", results.Liveness); stale {
		t.Fatal("the old instance's result was kept")
	}
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	lp, rp, sp := probe(1, 1, 1), probe(1, 1, 1), probe(1, 1, 2)
	h := newHarness(t, testPod(lp, rp, sp))
	h.run.set(sp, probes.Failure)
	if started, ready := h.status(runningStatus("containerd://a", time.Now())); started || ready {
		t.Fatalf("started=%v ready=%v before the startup probe ran", started, ready)
	}
	h.probeN(results.Startup, 1)
	h.probeN(results.Liveness, 3)
	h.probeN(results.Readiness, 3)
	if h.run.count(lp) != 0 || h.run.count(rp) != 0 {
		t.Fatalf("liveness ran %d and readiness %d times before startup succeeded", h.run.count(lp), h.run.count(rp))
	}
	h.run.set(sp, probes.Success)
	h.probeN(results.Startup, 1)
	if started, _ := h.status(runningStatus("containerd://a", time.Now())); !started {
		t.Fatal("not started after the startup probe succeeded")
	}
	h.probeN(results.Startup, 2)
	if n := h.run.count(sp); n != 2 {
		t.Fatalf("startup probe ran %d times, want it to stop once started (2)", n)
	}
	h.probeN(results.Liveness, 1)
	h.probeN(results.Readiness, 1)
	if h.run.count(lp) != 1 || h.run.count(rp) != 1 {
		t.Fatal("liveness/readiness did not run after startup")
	}
	if _, ready := h.status(runningStatus("containerd://a", time.Now())); !ready {
		t.Fatal("not ready")
	}
}

func TestStartupFailureRestarts(t *testing.T) {
	sp := probe(1, 1, 2)
	h := newHarness(t, testPod(nil, nil, sp))
	h.run.set(sp, probes.Failure)
	h.status(runningStatus("containerd://a", time.Now()))
	h.probeN(results.Startup, 2)
	rs := h.results()
	if len(rs) != 1 || rs[0].Probe != results.Startup || rs[0].Result != results.Failure {
		t.Fatalf("results %+v, want one Startup failure", rs)
	}
	h.probeN(results.Startup, 3)
	if n := h.run.count(sp); n != 2 {
		t.Fatalf("startup probe of a failed instance ran again (%d runs)", n)
	}
}

func TestInitialDelayAndNonRunning(t *testing.T) {
	lp, rp := probe(1, 1, 1), probe(1, 1, 1)
	lp.InitialDelaySeconds = 30
	h := newHarness(t, testPod(lp, rp, nil))
	h.status(runningStatus("containerd://a", time.Now()))
	h.probeN(results.Liveness, 2)
	if n := h.run.count(lp); n != 0 {
		t.Fatalf("probed %d times within initialDelaySeconds", n)
	}
	h.status(runningStatus("containerd://a", time.Now().Add(-31*time.Second)))
	h.probeN(results.Liveness, 1)
	if n := h.run.count(lp); n != 1 {
		t.Fatal("not probed after initialDelaySeconds")
	}
	h.probeN(results.Readiness, 1)
	// The container exits: no probe runs against it and it is not ready.
	s := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "containerd://a",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}}}
	if started, ready := h.status(s); started || ready {
		t.Fatalf("stopped container started=%v ready=%v", started, ready)
	}
	h.probeN(results.Liveness, 2)
	h.probeN(results.Readiness, 2)
	if h.run.count(lp) != 1 || h.run.count(rp) != 1 {
		t.Fatal("a stopped container was probed")
	}
	// With restartPolicy Never a stopped container is final: the workers end.
	h.pod.Spec.RestartPolicy = v1.RestartPolicyNever
	h.status(s)
	if h.workers[results.Liveness].doProbe() {
		t.Fatal("worker kept going for a container that will not restart")
	}
}

func TestTerminatingPodRunsOnlyReadiness(t *testing.T) {
	lp, rp, sp := probe(1, 1, 1), probe(1, 1, 1), probe(1, 1, 1)
	h := newHarness(t, testPod(lp, rp, sp))
	h.status(runningStatus("containerd://a", time.Now()))
	h.probeN(results.Startup, 1)
	h.status(runningStatus("containerd://a", time.Now()))
	now := metav1.Now()
	h.pod.DeletionTimestamp = &now
	h.status(runningStatus("containerd://a", time.Now()))
	if h.workers[results.Liveness].doProbe() {
		t.Fatal("liveness kept probing a terminating pod")
	}
	h.probeN(results.Readiness, 2)
	if h.run.count(lp) != 0 || h.run.count(rp) != 2 {
		t.Fatalf("liveness %d runs, readiness %d runs", h.run.count(lp), h.run.count(rp))
	}
}

func TestEventsPointAtContainer(t *testing.T) {
	lp := probe(1, 1, 3)
	h := newHarness(t, testPod(lp, nil, nil))
	h.status(runningStatus("containerd://a", time.Now()))
	h.run.mu.Lock()
	h.run.result[lp] = probes.Result{Status: probes.Success, Warning: "Probe terminated redirects, Response body: "}
	h.run.mu.Unlock()
	h.probeN(results.Liveness, 1)
	if e := <-h.rec.Events; !strings.HasPrefix(e, "Warning ProbeWarning Liveness probe warning: Probe terminated redirects") {
		t.Fatalf("event %q", e)
	}
}

// TestWorkersRunJitteredAndBounded runs real worker goroutines: first runs spread over the period,
// readiness is decided quickly after the status arrives, concurrency stays bounded, and RemovePod
// leaves no goroutine behind.
func TestWorkersRunJitteredAndBounded(t *testing.T) {
	base := runtime.NumGoroutine()
	run := newFakeRunner()
	m := New(Options{Runner: run, MaxConcurrent: 3})
	var pods []*v1.Pod
	var livenessProbes []*v1.Probe
	for i := 0; i < 40; i++ {
		lp, rp := probe(2, 1, 3), probe(2, 1, 3)
		p := testPod(lp, rp, nil)
		p.UID = types.UID("uid-jitter-" + string(rune('A'+i)))
		m.AddPod(p)
		m.AddPod(p) // idempotent
		m.UpdatePodStatus(p, runningStatus("containerd://"+string(p.UID), time.Now()))
		pods = append(pods, p)
		livenessProbes = append(livenessProbes, lp)
	}
	if n := len(m.workers); n != 80 {
		t.Fatalf("%d workers, want 80", n)
	}
	// Readiness was triggered by the status (no result yet): every container turns ready long before
	// the first period ends for most of them.
	deadline := time.Now().Add(5 * time.Second)
	ready := 0
	for time.Now().Before(deadline) {
		ready = 0
		for _, p := range pods {
			s := runningStatus("containerd://"+string(p.UID), time.Now())
			m.UpdatePodStatus(p, s)
			if s.ContainerStatuses[0].Ready {
				ready++
			}
		}
		if ready == len(pods) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ready != len(pods) {
		t.Fatalf("%d of %d pods ready", ready, len(pods))
	}
	// Wait for every liveness worker's first run, then check the first runs spread over the period.
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		done := 0
		for _, lp := range livenessProbes {
			if run.count(lp) > 0 {
				done++
			}
		}
		if done == len(livenessProbes) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	run.mu.Lock()
	var first, last time.Time
	for _, lp := range livenessProbes {
		ft, ok := run.first[lp]
		if !ok {
			run.mu.Unlock()
			t.Fatal("a liveness worker never ran")
		}
		if first.IsZero() || ft.Before(first) {
			first = ft
		}
		if ft.After(last) {
			last = ft
		}
	}
	run.mu.Unlock()
	if spread := last.Sub(first); spread < 700*time.Millisecond {
		t.Fatalf("first liveness runs spread over %v only: not jittered over the 2s period", spread)
	}
	if mx := run.maxInFlight.Load(); mx > 3 {
		t.Fatalf("%d probes ran at once, limit 3", mx)
	}
	for _, p := range pods {
		m.RemovePod(p)
	}
	waitGoroutines(t, base)
	if len(m.workers) != 0 || len(m.pods) != 0 {
		t.Fatalf("state left: %d workers, %d pods", len(m.workers), len(m.pods))
	}
	for _, p := range pods {
		for _, pt := range []results.ProbeType{results.Liveness, results.Readiness, results.Startup} {
			if r, ok := m.results.Get("containerd://"+string(p.UID), pt); ok {
				t.Fatalf("pod %s: %s result %s left after RemovePod", p.UID, pt, r)
			}
		}
	}
}

// TestRemovePodCancelsProbeInFlight: a worker blocked in a probe (or on the semaphore, or on sending a
// result nobody reads) ends on RemovePod and Close.
func TestRemovePodCancelsProbeInFlight(t *testing.T) {
	base := runtime.NumGoroutine()
	run := newFakeRunner()
	run.block = make(chan struct{})
	m := New(Options{Runner: run, MaxConcurrent: 1})
	var pods []*v1.Pod
	for i := 0; i < 5; i++ {
		p := testPod(probe(1, 1, 1), probe(1, 1, 1), nil)
		p.UID = types.UID("uid-block-" + string(rune('A'+i)))
		m.AddPod(p)
		m.UpdatePodStatus(p, runningStatus("containerd://"+string(p.UID), time.Now()))
		pods = append(pods, p)
	}
	deadline := time.Now().Add(3 * time.Second)
	for run.inFlight.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if run.inFlight.Load() != 1 {
		t.Fatalf("%d probes in flight, want 1 (limit)", run.inFlight.Load())
	}
	for _, p := range pods[:3] {
		m.RemovePod(p)
	}
	m.Close()
	waitGoroutines(t, base)
	m.AddPod(pods[4])
	if len(m.workers) != 0 {
		t.Fatal("a closed manager started workers")
	}
}

func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	n := runtime.NumGoroutine()
	for n > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, %d before: leak\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestAddPodSeedsFromStatus: a pod added with the status the kubelet wrote before a restart keeps the
// readiness and startup of its running container instances without waiting for a probe and without
// announcing a change; a container that had not started stays unstarted and not ready; a new container
// instance gets nothing from the old one's status.
func TestAddPodSeedsFromStatus(t *testing.T) {
	run := newFakeRunner()
	run.block = make(chan struct{}) // no probe decides anything during the test
	m := New(Options{Runner: run})
	defer m.Close()
	yes, no := true, false

	was := testPod(probe(1, 1, 1), probe(1, 1, 1), probe(1, 1, 1))
	was.Status = *runningStatus("containerd://a", time.Now())
	was.Status.ContainerStatuses[0].Started, was.Status.ContainerStatuses[0].Ready = &yes, true
	m.AddPod(was)
	s := runningStatus("containerd://a", time.Now())
	m.UpdatePodStatus(was, s)
	if cs := s.ContainerStatuses[0]; !*cs.Started || !cs.Ready {
		t.Fatalf("ready, started container after a restart: started=%v ready=%v, want both kept", *cs.Started, cs.Ready)
	}

	starting := testPod(nil, probe(1, 1, 1), probe(1, 1, 1))
	starting.Status = *runningStatus("containerd://s", time.Now())
	starting.Status.ContainerStatuses[0].Started = &no
	m.AddPod(starting)
	s = runningStatus("containerd://s", time.Now())
	m.UpdatePodStatus(starting, s)
	if cs := s.ContainerStatuses[0]; *cs.Started || cs.Ready {
		t.Fatalf("container in its startup period after a restart: started=%v ready=%v, want neither", *cs.Started, cs.Ready)
	}

	unready := testPod(nil, probe(1, 1, 1), nil)
	unready.Status = *runningStatus("containerd://u", time.Now())
	unready.Status.ContainerStatuses[0].Started = &yes
	m.AddPod(unready)
	s = runningStatus("containerd://u", time.Now())
	m.UpdatePodStatus(unready, s)
	if cs := s.ContainerStatuses[0]; !*cs.Started || cs.Ready {
		t.Fatalf("not-ready container after a restart: started=%v ready=%v, want started, not ready", *cs.Started, cs.Ready)
	}

	// Another instance of the ready container (restarted meanwhile) is probed afresh.
	s = runningStatus("containerd://b", time.Now())
	m.UpdatePodStatus(was, s)
	if cs := s.ContainerStatuses[0]; *cs.Started || cs.Ready {
		t.Fatalf("new instance took the old one's results: started=%v ready=%v", *cs.Started, cs.Ready)
	}
	select {
	case u := <-m.Results():
		t.Fatalf("seeding announced %+v", u)
	default:
	}
}

// TestReadinessWarmUp: failed readiness runs of a container started less than a period ago, before
// its first success, are retried at 10 ms growing by half to 500 ms, silently (no event, no failure counted);
// after the first success, or once the container is older than a period, failures count as usual.
func TestReadinessWarmUp(t *testing.T) {
	rp := probe(10, 1, 1)
	h := newHarness(t, testPod(nil, rp, nil))
	w := h.workers[results.Readiness]
	h.run.set(rp, probes.Failure)
	h.status(runningStatus("containerd://a", time.Now()))
	var delays []time.Duration
	for i := 0; i < 12; i++ {
		h.probeN(results.Readiness, 1)
		delays = append(delays, w.retryAfter)
	}
	want := []time.Duration{10 * time.Millisecond}
	for len(want) < len(delays) {
		want = append(want, min(want[len(want)-1]*3/2, 500*time.Millisecond))
	}
	if !slices.Equal(delays, want) || want[len(want)-1] != 500*time.Millisecond {
		t.Fatalf("warm-up retry delays %v, want %v", delays, want)
	}
	if rs := h.results(); len(rs) != 0 {
		t.Fatalf("warm-up failures decided a result: %+v", rs)
	}
	if n := len(h.rec.Events); n != 0 {
		t.Fatalf("%d events for warm-up failures, want none", n)
	}
	h.run.set(rp, probes.Success)
	h.probeN(results.Readiness, 1)
	if _, ready := h.status(runningStatus("containerd://a", time.Now())); !ready || w.retryAfter != 0 {
		t.Fatalf("after a success: ready=%v retry %v, want ready and no retry", ready, w.retryAfter)
	}
	// After the first success a failure counts (failureThreshold 1) and is reported.
	h.run.set(rp, probes.Failure)
	h.probeN(results.Readiness, 1)
	if _, ready := h.status(runningStatus("containerd://a", time.Now())); ready || w.retryAfter != 0 || len(h.rec.Events) != 1 {
		t.Fatalf("failure after success: ready=%v retry %v events %d, want not ready, no retry, 1 event", ready, w.retryAfter, len(h.rec.Events))
	}
	// A new instance started more than a period ago gets no warm-up.
	h.status(runningStatus("containerd://b", time.Now().Add(-11*time.Second)))
	h.probeN(results.Readiness, 1)
	if w.retryAfter != 0 || len(h.rec.Events) != 2 {
		t.Fatalf("old container: retry %v events %d, want no retry and 2 events", w.retryAfter, len(h.rec.Events))
	}

	// An exec probe keeps upstream's schedule: its failed first run counts and asks for no retry.
	ep := probe(10, 1, 1)
	ep.ProbeHandler = v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}
	he := newHarness(t, testPod(nil, ep, nil))
	he.run.set(ep, probes.Failure)
	he.status(runningStatus("containerd://e", time.Now()))
	he.probeN(results.Readiness, 1)
	if we := he.workers[results.Readiness]; we.retryAfter != 0 || len(he.rec.Events) != 1 {
		t.Fatalf("exec probe: retry %v events %d, want no warm-up retry and 1 event", we.retryAfter, len(he.rec.Events))
	}
}

// TestReadinessWarmUpRuns: a running worker whose container answers only after a few failed runs turns
// ready within the warm-up retries, long before the 10 s period, with no trigger in between.
func TestReadinessWarmUpRuns(t *testing.T) {
	base := runtime.NumGoroutine()
	rp := probe(10, 1, 3)
	pod := testPod(nil, rp, nil)
	run := newFakeRunner()
	run.set(rp, probes.Failure)
	m := New(Options{Runner: run})
	defer m.Close()
	m.AddPod(pod)
	start := time.Now()
	m.UpdatePodStatus(pod, runningStatus("containerd://a", start)) // triggers the first run
	for run.count(rp) < 3 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d runs in 5 s, want warm-up retries", run.count(rp))
		}
		time.Sleep(5 * time.Millisecond)
	}
	run.set(rp, probes.Success)
	select {
	case r := <-m.Results():
		if r.Result != results.Success || r.Probe != results.Readiness {
			t.Fatalf("result %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not ready 5 s after the container answered (period 10 s)")
	}
	m.RemovePod(pod)
	waitGoroutines(t, base)
}
