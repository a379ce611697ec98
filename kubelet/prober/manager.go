// Package prober is the kubelet's probe manager: one worker per container and probe type (liveness,
// readiness, startup) runs the container's probe on its schedule through package probes, applies
// successThreshold/failureThreshold, and turns the outcomes into container Ready/Started and into
// results.Updates that make the kubelet restart unhealthy containers and re-write pod status.
// Semantics follow the upstream kubelet's prober manager
// (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-probes):
//
//   - a startup probe gates liveness and readiness until it succeeds;
//   - initialDelaySeconds counts from the container's start; each worker's first run is jittered over
//     one period so pods added together do not probe in lockstep;
//   - a failed liveness or startup result puts the worker on hold until a new container instance
//     (container ID) appears, which is probed afresh;
//   - non-running containers are not probed; on a terminating pod only readiness keeps running;
//   - at most Options.MaxConcurrent probes run at once.
package prober

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/kubelet/prober/results"
	"github.com/nodekit/nodekit/probes"
)

// DefaultMaxConcurrent is how many probes may run at the same time when Options.MaxConcurrent is 0.
const DefaultMaxConcurrent = 64

// Runner runs one probe (probes.Prober implements it; tests substitute canned results).
type Runner interface {
	Run(ctx context.Context, p *v1.Probe, t probes.Target) probes.Result
}

// Options configure a Manager. Everything is optional.
type Options struct {
	// Runtime is the CRI runtime service exec probes run through (runtime/cri.Client.Runtime()).
	// Nil: exec probes end Unknown and never change a container's state.
	Runtime runtimeapi.RuntimeServiceClient
	// Recorder receives the Unhealthy (failed or errored probe) and ProbeWarning events, reported on the
	// pod with fieldPath spec.containers{name}. Nil: no events.
	Recorder record.EventRecorder
	// MaxConcurrent bounds the probes running at once (default DefaultMaxConcurrent).
	MaxConcurrent int
	// Runner replaces the probe handlers (tests). Default: probes.New(CRIExecer{Runtime}).
	Runner Runner
	// Logger gets one line per probe state change (pod=, container=, probe=). Nil: slog.Default().
	Logger *slog.Logger
}

// Manager is the probe manager the kubelet's ProbeManager hook takes (AddPod, RemovePod, UpdatePodStatus,
// Results). Create it with New; it is safe for concurrent use. Close stops every worker.
type Manager struct {
	runner   Runner
	recorder record.EventRecorder
	log      *slog.Logger
	sem      chan struct{}
	// results holds the decided results of container instances; absent = not yet decided.
	results *results.Manager

	mu      sync.Mutex
	pods    map[types.UID]*podState
	workers map[probeKey]*worker
	closed  bool
	wg      sync.WaitGroup
}

type probeKey struct {
	pod       types.UID
	container string
	probe     results.ProbeType
}

// podState is what workers know of their pod, refreshed by every UpdatePodStatus.
type podState struct {
	pod        *v1.Pod
	podIP      string
	deleting   bool
	terminal   bool
	containers map[string]containerState
}

type containerState struct {
	id         string
	running    bool
	startedAt  time.Time
	terminated bool
	started    bool
}

// New returns a Manager with no pods.
func New(o Options) *Manager {
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.Runner == nil {
		var exec probes.Execer
		if o.Runtime != nil {
			exec = CRIExecer{Runtime: o.Runtime}
		}
		o.Runner = probes.New(exec)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Manager{
		runner: o.Runner, recorder: o.Recorder, log: o.Logger,
		sem:     make(chan struct{}, o.MaxConcurrent),
		results: results.NewManager(),
		pods:    map[types.UID]*podState{},
		workers: map[probeKey]*worker{},
	}
}

// Results delivers probe results that changed (a container turning ready or not ready, started, or
// failing liveness/startup past failureThreshold). Workers wait for the reader; they never drop one.
func (m *Manager) Results() <-chan results.Update { return m.results.Updates() }

// probed lists the containers that may have probes: app containers and sidecars (restartable init
// containers); plain init containers run to completion and have none.
func probed(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// AddPod starts a worker for each probe of the pod's containers (idempotent). A pod new to the
// manager takes its containers' startup and readiness results from pod.Status (see seed).
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	_, known := m.pods[pod.UID]
	if !known {
		m.pods[pod.UID] = &podState{pod: pod, containers: map[string]containerState{}}
	}
	for _, c := range probed(pod) {
		for _, p := range []struct {
			t    results.ProbeType
			spec *v1.Probe
		}{{results.Startup, c.StartupProbe}, {results.Readiness, c.ReadinessProbe}, {results.Liveness, c.LivenessProbe}} {
			if p.spec == nil {
				continue
			}
			key := probeKey{pod.UID, c.Name, p.t}
			if _, ok := m.workers[key]; ok {
				continue
			}
			w := newWorker(m, key, pod, c, p.spec)
			if !known {
				m.seedLocked(pod, c, w)
			}
			m.workers[key] = w
			m.wg.Add(1)
			go w.run()
		}
	}
}

// RemovePod stops the pod's workers and forgets its results. Workers end at once, cancelling a probe in
// flight; it does not wait for them (Close does).
func (m *Manager) RemovePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.workers {
		if key.pod == pod.UID {
			w.stop()
			delete(m.workers, key)
		}
	}
	if ps, ok := m.pods[pod.UID]; ok {
		for _, c := range ps.containers {
			m.forgetLocked(c.id)
		}
		delete(m.pods, pod.UID)
	}
}

// seedLocked carries the probe results of a restarted kubelet over to the new worker w of container c:
// a running container instance whose status in pod.Status (written by the kubelet before, same
// container ID) says Started, or Ready, keeps that startup, or readiness, Success until its probe decides
// otherwise, so a restart does not turn ready pods not ready while their first probes run. A container
// that was not started (still in its startup period) or not ready gets no result: it stays unstarted, or
// not ready, until its probe succeeds. It runs before w does.
func (m *Manager) seedLocked(pod *v1.Pod, c *v1.Container, w *worker) {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name != c.Name || cs.ContainerID == "" || cs.State.Running == nil || cs.Started == nil || !*cs.Started {
				continue
			}
			if w.key.probe == results.Liveness || (w.key.probe == results.Readiness && !cs.Ready) ||
				!m.results.Seed(cs.ContainerID, w.key.probe, results.Success) {
				return
			}
			// The worker owns the seeded result: a new container instance replaces it.
			w.containerID = cs.ContainerID
			m.log.Info("probe result kept from the pod status", "pod", w.podName, "podUID", pod.UID,
				"container", cs.Name, "probe", w.key.probe, "containerID", cs.ContainerID)
			return
		}
	}
}

// Close stops all workers and waits for them to end. The Manager accepts no pods afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	for key, w := range m.workers {
		w.stop()
		delete(m.workers, key)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Manager) forgetLocked(containerID string) {
	for _, t := range []results.ProbeType{results.Liveness, results.Readiness, results.Startup} {
		m.results.Remove(containerID, t)
	}
}

// UpdatePodStatus sets Started and Ready of every container status from the probe results, as upstream:
// a running container is Started once its startup probe succeeded (at once without one); a Started,
// running container is Ready once its readiness probe succeeded (at once without one); a plain init
// container is Ready once it exited 0. A container whose readiness probe has no result yet gets its
// probe run now. It also records the container IDs, states and the pod IP the workers probe; it never
// blocks on a probe.
func (m *Manager) UpdatePodStatus(pod *v1.Pod, s *v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[pod.UID]
	if ps != nil {
		ps.pod = pod
		ps.podIP = s.PodIP
		ps.deleting = pod.DeletionTimestamp != nil
		ps.terminal = podspec.IsTerminal(pod.Status.Phase) || podspec.IsTerminal(s.Phase)
	}
	inits := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		inits[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
	}
	set := func(cs *v1.ContainerStatus, init bool) {
		started := m.startedLocked(pod.UID, cs)
		cs.Started = &started
		if ps != nil {
			st := containerState{id: cs.ContainerID, running: cs.State.Running != nil, terminated: cs.State.Terminated != nil, started: started}
			if r := cs.State.Running; r != nil {
				st.startedAt = r.StartedAt.Time
			}
			ps.containers[cs.Name] = st
		}
		if init {
			c := inits[cs.Name]
			if c == nil || c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
				cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
				return
			}
		}
		if !started {
			cs.Ready = false
			return
		}
		cs.Ready = m.readyLocked(pod.UID, cs)
	}
	for i := range s.InitContainerStatuses {
		set(&s.InitContainerStatuses[i], true)
	}
	for i := range s.ContainerStatuses {
		set(&s.ContainerStatuses[i], false)
	}
}

func (m *Manager) startedLocked(uid types.UID, cs *v1.ContainerStatus) bool {
	if cs.State.Running == nil {
		return false
	}
	if r, found := m.results.Get(cs.ContainerID, results.Startup); found {
		return r == results.Success
	}
	// A startup probe that has not succeeded yet means not started.
	_, probing := m.workers[probeKey{uid, cs.Name, results.Startup}]
	return !probing
}

func (m *Manager) readyLocked(uid types.UID, cs *v1.ContainerStatus) bool {
	if r, found := m.results.Get(cs.ContainerID, results.Readiness); found {
		return r == results.Success
	}
	w, probing := m.workers[probeKey{uid, cs.Name, results.Readiness}]
	if probing {
		w.trigger() // no result yet: probe now rather than at the next tick
	}
	return !probing
}

// setResult records a decided result and, when it changed, queues it for the kubelet. A stopped worker
// records nothing: RemovePod and Close stop workers before they forget results.
func (m *Manager) setResult(w *worker, containerID string, r results.Result, msg string) {
	u := results.Update{PodUID: w.key.pod, ContainerName: w.key.container, ContainerID: containerID,
		Probe: w.key.probe, Result: r, Message: msg}
	if m.results.Set(w.ctx, u) {
		m.log.Info("probe result changed", "pod", w.podName, "podUID", w.key.pod, "container", w.key.container,
			"probe", w.key.probe, "result", r, "containerID", containerID)
	}
}

// snapshot returns what the worker needs from its pod's latest status; ok is false before the first
// status.
func (m *Manager) snapshot(uid types.UID, container string) (ps podState, c containerState, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pods[uid]
	if p == nil {
		return podState{}, containerState{}, false
	}
	c, ok = p.containers[container]
	return podState{pod: p.pod, podIP: p.podIP, deleting: p.deleting, terminal: p.terminal}, c, ok
}

// workerDone removes an ending worker and the results of its container instance.
func (m *Manager) workerDone(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workers[w.key] == w {
		delete(m.workers, w.key)
		if w.containerID != "" {
			m.results.Remove(w.containerID, w.key.probe)
		}
	}
}

// jitter is the delay of a worker's first run: uniform over [0, period).
func jitter(period time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(period)))
}
