package prober

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"

	"github.com/nodekit/nodekit/kubelet/prober/results"
	"github.com/nodekit/nodekit/probes"
)

// worker runs one probe of one container, across the container's instances.
type worker struct {
	m         *Manager
	key       probeKey
	podName   string
	pod       *v1.Pod
	container *v1.Container
	spec      *v1.Probe
	period    time.Duration

	ctx       context.Context
	cancel    context.CancelFunc
	stopOnce  sync.Once
	triggerCh chan struct{}

	// Owned by the run goroutine.
	containerID string
	lastResult  probes.Status
	resultRun   int
	onHold      bool
	// succeeded: the readiness probe of this container instance passed once (warm-up is over).
	succeeded bool
	// retryAfter, when positive, is the delay of a warm-up retry (see warmUp).
	retryAfter time.Duration
}

// Warm-up: the first retry delay after a readiness probe of a just-started container failed, and the
// longest (the delay grows by half from one retry to the next: at most a third of the time to answer is
// lost to the schedule).
const (
	warmUpFirst = 10 * time.Millisecond
	warmUpMax   = 500 * time.Millisecond
)

func newWorker(m *Manager, key probeKey, pod *v1.Pod, c *v1.Container, spec *v1.Probe) *worker {
	period := time.Duration(spec.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second // the API default of periodSeconds
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{m: m, key: key, podName: pod.Namespace + "/" + pod.Name, pod: pod, container: c, spec: spec,
		period: period, ctx: ctx, cancel: cancel, triggerCh: make(chan struct{}, 1)}
}

func (w *worker) stop() { w.stopOnce.Do(w.cancel) }

// trigger asks for a run now; it never blocks (a pending request suffices).
func (w *worker) trigger() {
	select {
	case w.triggerCh <- struct{}{}:
	default:
	}
}

// run probes once after a random part of the period, then every period (and on trigger, and on a
// warm-up retry) until the worker is stopped or doProbe says the pod or container is done.
func (w *worker) run() {
	defer w.m.wg.Done()
	defer w.m.workerDone(w)
	timer := time.NewTimer(jitter(w.period))
	defer timer.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-timer.C:
			timer.Reset(w.period)
		case <-w.triggerCh:
		case <-retry:
		}
		if !w.doProbe() {
			return
		}
		retry = nil
		if w.retryAfter > 0 {
			retry = time.After(w.retryAfter)
		}
	}
}

// warmUp reports whether the failed run res of a network readiness probe (HTTP, TCP, gRPC: a refused
// connection costs the container nothing; an exec probe starts a process in it, so it keeps upstream's
// schedule) is one of the container's warm-up: its probe never passed, and the container started less
// than one period ago. Such a run is retried after
// retryAfter (10 ms, growing by half up to 500 ms), and neither counts towards failureThreshold nor records an
// event: a container is typically probed within milliseconds of its start, before its server listens,
// and without the retry it would stay not ready until the next sync's trigger or the next period. This
// is nodekit's own (upstream waits for the next period or PLEG-driven status update); it only brings a
// first success forward, it never makes a container ready that does not pass its probe.
// lastRetry is the delay of the previous retry (0: none).
func (w *worker) warmUp(res probes.Result, c containerState, lastRetry time.Duration) bool {
	if w.key.probe != results.Readiness || w.spec.Exec != nil || w.succeeded || res.Status != probes.Failure || time.Since(c.startedAt) >= w.period {
		return false
	}
	w.retryAfter = min(max(lastRetry*3/2, warmUpFirst), warmUpMax)
	return true
}

// doProbe runs the probe once if the container is in a state to be probed and applies the thresholds.
// It returns false when the worker should end.
func (w *worker) doProbe() bool {
	lastRetry := w.retryAfter
	w.retryAfter = 0 // only a failed warm-up run asks for a retry
	ps, c, ok := w.m.snapshot(w.key.pod, w.key.container)
	if !ok || c.id == "" {
		return true // no status or no container yet
	}
	if ps.terminal {
		return false
	}
	if c.id != w.containerID {
		// A new container instance: start afresh.
		if w.containerID != "" {
			w.m.results.Remove(w.containerID, w.key.probe)
		}
		w.containerID, w.onHold, w.resultRun, w.lastResult, w.succeeded, w.retryAfter = c.id, false, 0, "", false, 0
	}
	if w.onHold {
		return true // failed liveness/startup: wait for the restarted container
	}
	if !c.running {
		if w.key.probe == results.Readiness {
			w.m.setResult(w, c.id, results.Failure, "container is not running")
		}
		// A stopped container that will not restart is done.
		return !(c.terminated && ps.pod.Spec.RestartPolicy == v1.RestartPolicyNever)
	}
	if ps.deleting && w.key.probe != results.Readiness {
		// A terminating pod is not restarted for failing liveness or startup; end quietly.
		return false
	}
	if time.Since(c.startedAt) < time.Duration(w.spec.InitialDelaySeconds)*time.Second {
		return true
	}
	if c.started == (w.key.probe == results.Startup) {
		// The startup probe is done once the container started; the others wait until then.
		return true
	}

	select {
	case w.m.sem <- struct{}{}:
	case <-w.ctx.Done():
		return false
	}
	res := w.m.runner.Run(w.ctx, w.spec, probes.Target{PodIP: ps.podIP, ContainerID: c.id, Container: w.container})
	<-w.m.sem
	if w.ctx.Err() != nil {
		return false // stopped while probing: the result is meaningless
	}
	w.m.log.Debug("probe ran", "pod", w.podName, "container", w.key.container, "probe", w.key.probe, "status", res.Status, "reason", res.Reason)
	if w.warmUp(res, c, lastRetry) {
		return true
	}
	if res.Status == probes.Success {
		w.succeeded = true
	}

	switch {
	case res.Status == probes.Unknown:
		// As upstream: the probe could not run; report it and keep the state.
		w.event(v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe errored: %s", w.key.probe, res.Reason))
		return true
	case res.Status == probes.Failure:
		w.event(v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", w.key.probe, res.Reason))
	case res.Warning != "":
		w.event(v1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe warning: %s", w.key.probe, res.Warning))
	}
	if res.Status == w.lastResult {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = res.Status, 1
	}
	failed := res.Status == probes.Failure
	if (failed && w.resultRun < int(max(w.spec.FailureThreshold, 1))) ||
		(!failed && w.resultRun < int(max(w.spec.SuccessThreshold, 1))) {
		return true
	}
	r, msg := results.Success, ""
	if failed {
		r, msg = results.Failure, fmt.Sprintf("%s probe failed: %s", w.key.probe, res.Reason)
	}
	w.m.setResult(w, c.id, r, msg)
	if failed && w.key.probe != results.Readiness {
		// The kubelet restarts this instance; probing it further would only race the kill.
		w.onHold, w.resultRun = true, 0
	}
	return true
}

// event records an event on the pod, pointing at the container (fieldPath spec.containers{name}).
func (w *worker) event(eventType, reason, msg string) {
	if w.m.recorder == nil {
		return
	}
	ref, err := reference.GetReference(scheme.Scheme, w.pod)
	if err != nil {
		w.m.recorder.Event(w.pod, eventType, reason, msg)
		return
	}
	ref.FieldPath = fmt.Sprintf("spec.containers{%s}", w.container.Name)
	if w.isInit() {
		ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", w.container.Name)
	}
	w.m.recorder.Event(ref, eventType, reason, msg)
}

func (w *worker) isInit() bool {
	for i := range w.pod.Spec.InitContainers {
		if w.pod.Spec.InitContainers[i].Name == w.container.Name {
			return true
		}
	}
	return false
}
