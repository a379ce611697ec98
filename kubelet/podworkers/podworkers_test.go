package podworkers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recorder is a Syncer that records calls and checks that calls for one pod never overlap.
type recorder struct {
	mu       sync.Mutex
	calls    []string
	inFlight int
	overlap  bool
	terminal bool
	failOnce map[string]bool
	grace    int64
	slow     time.Duration
}

func (r *recorder) enter(what string) error {
	r.mu.Lock()
	r.inFlight++
	if r.inFlight > 1 {
		r.overlap = true
	}
	r.calls = append(r.calls, what)
	fail := r.failOnce[what]
	delete(r.failOnce, what)
	r.mu.Unlock()
	time.Sleep(r.slow)
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
	if fail {
		return errors.New("injected")
	}
	return nil
}

func (r *recorder) SyncPod(_ context.Context, _ *v1.Pod) (SyncResult, error) {
	err := r.enter("sync")
	r.mu.Lock()
	defer r.mu.Unlock()
	return SyncResult{Terminal: r.terminal}, err
}
func (r *recorder) SyncTerminatingPod(_ context.Context, _ *v1.Pod, g int64) error {
	r.mu.Lock()
	r.grace = g
	r.mu.Unlock()
	return r.enter("terminating")
}
func (r *recorder) SyncTerminatedPod(context.Context, *v1.Pod) error { return r.enter("terminated") }
func (r *recorder) SyncRemovedPod(context.Context, *v1.Pod) error    { return r.enter("removed") }

func (r *recorder) seen(what string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls {
		if c == what {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newWorkers(t *testing.T, r *recorder) *Workers {
	ctx, cancel := context.WithCancel(context.Background())
	w := New(ctx, r, time.Hour, 20*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { cancel(); w.Wait() })
	return w
}

func pod() *v1.Pod {
	g := int64(7)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: &g}}
}

func TestLifecycleDeletedPod(t *testing.T) {
	r := &recorder{slow: 2 * time.Millisecond}
	w := newWorkers(t, r)
	p := pod()
	for i := 0; i < 20; i++ {
		w.UpdatePod(UpdatePodOptions{Pod: p})
	}
	waitFor(t, "first sync", func() bool { return r.seen("sync") })
	deleted := p.DeepCopy()
	now := metav1.Now()
	three := int64(3)
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, &three
	w.UpdatePod(UpdatePodOptions{Pod: deleted})
	waitFor(t, "terminated", func() bool { return r.seen("terminated") })
	if s, ok := w.State(p.UID); !ok || s != Terminated {
		t.Fatalf("state %v %v", s, ok)
	}
	if r.grace != 3 {
		t.Errorf("grace %d, want the deletion grace period 3", r.grace)
	}
	w.UpdatePod(UpdatePodOptions{Pod: deleted, Removed: true})
	waitFor(t, "worker forgotten", func() bool { _, ok := w.State(p.UID); return !ok })
	if !r.seen("removed") || r.overlap {
		t.Errorf("calls %v overlap=%v", r.calls, r.overlap)
	}
	// 20 updates in a burst are coalesced.
	n := 0
	for _, c := range r.calls {
		if c == "sync" {
			n++
		}
	}
	if n >= 20 {
		t.Errorf("%d syncs for a burst of 20 updates: not coalesced", n)
	}
}

func TestTerminalPodNeverSyncsAgainAndFailuresRetry(t *testing.T) {
	r := &recorder{terminal: true, failOnce: map[string]bool{"terminating": true}}
	w := newWorkers(t, r)
	p := pod()
	w.UpdatePod(UpdatePodOptions{Pod: p})
	waitFor(t, "terminated after a retried terminating step", func() bool { return r.seen("terminated") })
	r.mu.Lock()
	before := len(r.calls)
	r.mu.Unlock()
	w.UpdatePod(UpdatePodOptions{Pod: p})
	time.Sleep(50 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls[before:] {
		if c == "sync" || c == "terminating" {
			t.Fatalf("a terminated pod was synced again: %v", r.calls)
		}
	}
	if r.grace != 7 {
		t.Errorf("grace %d, want the spec's 7", r.grace)
	}
}

func TestKillWithGraceOverride(t *testing.T) {
	r := &recorder{}
	w := newWorkers(t, r)
	one, five := int64(1), int64(5)
	w.UpdatePod(UpdatePodOptions{Pod: pod(), Removed: true, GracePeriod: &five})
	w.UpdatePod(UpdatePodOptions{Pod: pod(), Removed: true, GracePeriod: &one})
	waitFor(t, "removed", func() bool { return r.seen("removed") })
	if r.seen("sync") {
		t.Errorf("a removed pod was synced: %v", r.calls)
	}
}
