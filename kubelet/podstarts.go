package kubelet

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/kubelet/metrics"
)

// podStarts records the pod lifecycle metrics (upstream's pod startup latency tracker and the pod
// worker duration, pkg/kubelet/util/pod_startup_latency_tracker.go and kubelet.go SyncPod):
//
//   - kubelet_pod_start_duration_seconds: from the first time the kubelet sees a pod (its creation as
//     observed by the kubelet) to the first status with every app container running, once per pod.
//     Pods already Running (or finished) when first seen — adopted after a kubelet restart — are not
//     observed: their start happened before this kubelet.
//   - kubelet_pod_worker_duration_seconds{operation_type}: every SyncPod, "create" for a pod's first
//     sync, "update" for the first sync after its spec, labels, annotations or deletion changed, else
//     "sync" (PLEG events, probe results, periodic resync).
//
// All methods do nothing when the kubelet has no Metrics.
type podStarts struct {
	m *metrics.Metrics

	mu        sync.Mutex
	firstSeen map[types.UID]time.Time // pods whose start is still to be observed
	synced    map[types.UID]bool      // pods synced at least once
	changed   map[types.UID]bool      // pods updated by their source since their last sync
}

func newPodStarts(m *metrics.Metrics) podStarts {
	return podStarts{m: m, firstSeen: map[types.UID]time.Time{}, synced: map[types.UID]bool{}, changed: map[types.UID]bool{}}
}

// seen notes the first sight of a pod that has not started yet.
func (p *podStarts) seen(pod *v1.Pod, now time.Time) {
	if p.m == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.synced[pod.UID] || pod.Status.Phase == v1.PodRunning || podspec.IsTerminal(pod.Status.Phase) {
		return
	}
	if _, ok := p.firstSeen[pod.UID]; !ok {
		p.firstSeen[pod.UID] = now
	}
}

// updated marks that the pod's next sync handles a change from its source.
func (p *podStarts) updated(uid types.UID) {
	if p.m == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.synced[uid] {
		p.changed[uid] = true
	}
}

// running observes the pod's start duration the first time status s has all app containers running.
func (p *podStarts) running(pod *v1.Pod, s *v1.PodStatus, now time.Time) {
	if p.m == nil || len(s.ContainerStatuses) < len(pod.Spec.Containers) {
		return
	}
	for _, cs := range s.ContainerStatuses {
		if cs.State.Running == nil {
			return
		}
	}
	p.mu.Lock()
	first, ok := p.firstSeen[pod.UID]
	delete(p.firstSeen, pod.UID)
	p.mu.Unlock()
	if ok {
		p.m.PodStartDuration.Observe(now.Sub(first).Seconds())
	}
}

// observeSync records one SyncPod of the pod that began at start.
func (p *podStarts) observeSync(uid types.UID, start time.Time) {
	if p.m == nil {
		return
	}
	p.mu.Lock()
	op := "sync"
	switch {
	case !p.synced[uid]:
		op = "create"
	case p.changed[uid]:
		op = "update"
	}
	p.synced[uid] = true
	delete(p.changed, uid)
	p.mu.Unlock()
	p.m.PodWorkerDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// forget drops what is kept about a pod gone from its source.
func (p *podStarts) forget(uid types.UID) {
	if p.m == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.firstSeen, uid)
	delete(p.synced, uid)
	delete(p.changed, uid)
}
