// Package results holds probe outcomes: the probe types, the outcome of one probe of one container
// instance, and Manager, the cache of decided outcomes with the channel that announces each change.
// The prober writes it; the kubelet reads the changes (through its ProbeManager hook) and acts on them.
// It is a leaf: it imports neither the kubelet nor the prober, so both can use it. The shape follows
// upstream's pkg/kubelet/prober/results, with one cache for the three probe types instead of three.
package results

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// ProbeType names the three container probes (Kubernetes "Container probes").
type ProbeType string

// The probe types, spelled as upstream's Unhealthy events spell them ("Liveness probe failed: …").
const (
	Liveness  ProbeType = "Liveness"
	Readiness ProbeType = "Readiness"
	Startup   ProbeType = "Startup"
)

// Result is a probe's decided outcome, after successThreshold/failureThreshold.
type Result int

// The outcomes. Unknown (the zero value) means nothing is decided yet; Manager never holds it.
const (
	Unknown Result = iota
	Success
	Failure
)

// String returns "Unknown", "Success" or "Failure".
func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "Unknown"
	}
}

// Update is one probe outcome that changed, for one container instance.
type Update struct {
	PodUID        types.UID
	ContainerName string
	// ContainerID is the CRI container ID in "<runtime>://<id>" form, as in ContainerStatus.ContainerID.
	ContainerID string
	Probe       ProbeType
	// Result is Success or Failure.
	Result Result
	// Message explains a failure, e.g. `Liveness probe failed: HTTP probe failed with statuscode: 500`.
	Message string
}

// DefaultUpdatesBuffer is how many updates Updates buffers before Set waits for the reader.
const DefaultUpdatesBuffer = 128

type key struct {
	containerID string
	probe       ProbeType
}

// Manager caches the decided result of each probe of each container instance (by container ID and probe
// type) and announces every change on Updates. Create it with NewManager; it is safe for concurrent use.
type Manager struct {
	mu      sync.Mutex
	results map[key]Result
	updates chan Update
}

// NewManager returns an empty Manager whose Updates buffers DefaultUpdatesBuffer updates.
func NewManager() *Manager {
	return &Manager{results: map[key]Result{}, updates: make(chan Update, DefaultUpdatesBuffer)}
}

// Get returns the decided result of probe on container instance containerID; ok is false when none is.
func (m *Manager) Get(containerID string, probe ProbeType) (r Result, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok = m.results[key{containerID, probe}]
	return r, ok
}

// Set records u.Result for u.ContainerID and u.Probe and, when that is news, sends u on Updates. News is
// a result different from the recorded one; with none recorded, any result except a liveness Success (a
// container without a liveness result counts as healthy, so only its failure is news). The send waits for
// the reader (updates are never dropped) until ctx ends. Set records nothing once ctx has ended, so a
// caller that cancels a writer's ctx before calling Remove leaves no result of it behind. It returns
// whether u was news; u.Result must be Success or Failure.
func (m *Manager) Set(ctx context.Context, u Update) (news bool) {
	k := key{u.ContainerID, u.Probe}
	m.mu.Lock()
	if ctx.Err() != nil {
		m.mu.Unlock()
		return false
	}
	prev, found := m.results[k]
	m.results[k] = u.Result
	m.mu.Unlock()
	if (found && prev == u.Result) || (!found && u.Probe == Liveness && u.Result == Success) {
		return false
	}
	select {
	case m.updates <- u:
	case <-ctx.Done():
	}
	return true
}

// Seed records r for containerID and probe unless a result is recorded, without announcing it: the
// result is already known, e.g. read back from the pod status the kubelet wrote before it restarted.
// It reports whether it recorded r; r must be Success or Failure.
func (m *Manager) Seed(containerID string, probe ProbeType, r Result) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{containerID, probe}
	if _, found := m.results[k]; found {
		return false
	}
	m.results[k] = r
	return true
}

// Remove forgets the result of probe on container instance containerID (no update is sent).
func (m *Manager) Remove(containerID string, probe ProbeType) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.results, key{containerID, probe})
}

// Updates delivers the results that changed (Set's news). Set waits when DefaultUpdatesBuffer are unread.
func (m *Manager) Updates() <-chan Update { return m.updates }
