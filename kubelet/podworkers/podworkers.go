// Package podworkers runs one worker goroutine per pod. Updates for a pod are serialized on its worker and
// coalesced (the latest spec wins), and each worker walks the pod through the kubelet's lifecycle, as
// upstream's pod workers do:
//
//	syncing      → SyncPod until the pod is deleted, killed, or reaches a terminal phase
//	terminating  → SyncTerminatingPod: stop every container (grace period) and the sandbox
//	terminated   → SyncTerminatedPod: release volumes and cgroups, final status, finish API deletion
//	removed      → SyncRemovedPod: remove containers, sandboxes and logs, then the worker is forgotten
//
// A pod never goes back from terminating to syncing: a pod that reached a terminal phase never restarts.
package podworkers

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SyncResult tells the worker what SyncPod saw.
type SyncResult struct {
	// Terminal: every container finished and none will be restarted under the restart policy; the pod
	// moves to terminating.
	Terminal bool
	// RequeueAfter, when positive, asks for the next sync no later than this (e.g. when a restart
	// back-off expires).
	RequeueAfter time.Duration
}

// Syncer carries out the lifecycle steps. Every method must be idempotent: a step that fails is retried.
type Syncer interface {
	// SyncPod converges the runtime to the pod spec and updates its status.
	SyncPod(ctx context.Context, pod *v1.Pod) (SyncResult, error)
	// SyncTerminatingPod stops all of the pod's containers within gracePeriod seconds, then its sandbox.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, gracePeriod int64) error
	// SyncTerminatedPod runs once the pod's containers are all stopped: volumes and cgroups are
	// released, the final status written, and for a pod with a deletionTimestamp the API object deleted.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod) error
	// SyncRemovedPod removes what is left of a pod that no source has any more (containers, sandboxes,
	// log and pod directories).
	SyncRemovedPod(ctx context.Context, pod *v1.Pod) error
}

// UpdatePodOptions is one update for a pod's worker.
type UpdatePodOptions struct {
	// Pod is the latest version of the pod (required). For a pod known only from the runtime (an orphan)
	// it carries at least namespace, name and UID.
	Pod *v1.Pod
	// Kill terminates the pod even without a deletionTimestamp (it left the node's sources, or is an orphan).
	Kill bool
	// Removed: no source has the pod any more; after termination its remains are removed and the worker
	// forgotten. Implies Kill.
	Removed bool
	// GracePeriod overrides the grace period of a kill, in seconds (the shortest one given wins).
	GracePeriod *int64
}

// State is where a pod is in its lifecycle.
type State int

// Lifecycle states.
const (
	Syncing State = iota
	Terminating
	Terminated
)

func (s State) String() string {
	return [...]string{"syncing", "terminating", "terminated"}[s]
}

// Workers owns the pod workers. Create with New; UpdatePod starts a worker on a pod's first update.
type Workers struct {
	syncer Syncer
	resync time.Duration
	retry  time.Duration
	log    *slog.Logger

	ctx     context.Context
	mu      sync.Mutex
	workers map[types.UID]*worker
	wg      sync.WaitGroup
}

type worker struct {
	uid     types.UID
	wake    chan struct{}
	timer   *time.Timer
	pod     *v1.Pod
	kill    bool
	removed bool
	grace   *int64
	state   State
}

// New returns pod workers that call syncer. A synced pod is synced again after resync (the kubelet's
// --sync-frequency) at the latest; a failed step is retried after retry. Workers stop when ctx ends.
func New(ctx context.Context, syncer Syncer, resync, retry time.Duration, log *slog.Logger) *Workers {
	return &Workers{syncer: syncer, resync: resync, retry: retry, log: log, ctx: ctx, workers: map[types.UID]*worker{}}
}

// UpdatePod queues an update for the pod's worker, starting the worker when the pod is new. It never
// blocks on the worker.
func (p *Workers) UpdatePod(o UpdatePodOptions) {
	if o.Pod == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[o.Pod.UID]
	if !ok {
		if p.ctx.Err() != nil {
			return
		}
		w = &worker{uid: o.Pod.UID, wake: make(chan struct{}, 1)}
		p.workers[o.Pod.UID] = w
		p.wg.Add(1)
		go p.run(w)
	}
	w.pod = o.Pod
	w.kill = w.kill || o.Kill || o.Removed
	w.removed = w.removed || o.Removed
	if o.GracePeriod != nil && (w.grace == nil || *o.GracePeriod < *w.grace) {
		g := *o.GracePeriod
		w.grace = &g
	}
	signal(w.wake)
}

// State returns the pod's lifecycle state and whether it has a worker.
func (p *Workers) State(uid types.UID) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		return 0, false
	}
	return w.state, true
}

// Known returns the UIDs of every pod with a worker.
func (p *Workers) Known() []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]types.UID, 0, len(p.workers))
	for uid := range p.workers {
		out = append(out, uid)
	}
	return out
}

// Wait blocks until every worker has returned (after ctx ended).
func (p *Workers) Wait() { p.wg.Wait() }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// requeue wakes the worker after d, replacing any earlier timer. Called with p.mu held.
func (p *Workers) requeue(w *worker, d time.Duration) {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.AfterFunc(d, func() { signal(w.wake) })
}

func (p *Workers) run(w *worker) {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			p.mu.Lock()
			if w.timer != nil {
				w.timer.Stop()
			}
			p.mu.Unlock()
			return
		case <-w.wake:
		}
		if p.step(w) {
			return
		}
	}
}

// gracePeriod is the override if any, else the pod's deletion grace period, else its spec's (default 30).
func gracePeriod(pod *v1.Pod, override *int64) int64 {
	switch {
	case override != nil:
		return *override
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return v1.DefaultTerminationGracePeriodSeconds
}

// step runs one lifecycle step for the worker's latest update; it returns true when the worker is done.
func (p *Workers) step(w *worker) bool {
	p.mu.Lock()
	pod, kill, removed, grace, state := w.pod, w.kill, w.removed, w.grace, w.state
	p.mu.Unlock()
	ctx := p.ctx
	log := p.log.With("pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID)

	next := func(s State) {
		p.mu.Lock()
		if w.state != s {
			log.Info("pod worker state", "state", s.String())
		}
		w.state = s
		signal(w.wake)
		p.mu.Unlock()
	}
	retry := func(what string, err error) bool {
		log.Warn("pod worker step failed, will retry", "step", what, "retry", p.retry, "err", err)
		p.mu.Lock()
		p.requeue(w, p.retry)
		p.mu.Unlock()
		return false
	}

	switch state {
	case Syncing:
		if kill || pod.DeletionTimestamp != nil {
			next(Terminating)
			return false
		}
		res, err := p.syncer.SyncPod(ctx, pod)
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			log.Warn("sync pod", "err", err)
		}
		if res.Terminal {
			next(Terminating)
			return false
		}
		after := p.resync
		if err != nil {
			after = p.retry
		}
		if res.RequeueAfter > 0 {
			after = res.RequeueAfter
		}
		p.mu.Lock()
		p.requeue(w, after)
		p.mu.Unlock()
	case Terminating:
		if err := p.syncer.SyncTerminatingPod(ctx, pod, gracePeriod(pod, grace)); err != nil {
			return retry("terminating", err)
		}
		next(Terminated)
	case Terminated:
		if err := p.syncer.SyncTerminatedPod(ctx, pod); err != nil {
			return retry("terminated", err)
		}
		if !removed {
			return false
		}
		if err := p.syncer.SyncRemovedPod(ctx, pod); err != nil {
			return retry("removed", err)
		}
		p.mu.Lock()
		// An update may have raced in; the pod is gone from every source, so it changes nothing.
		delete(p.workers, w.uid)
		if w.timer != nil {
			w.timer.Stop()
		}
		p.mu.Unlock()
		log.Info("pod removed")
		return true
	}
	return false
}
