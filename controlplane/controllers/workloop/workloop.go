// Package workloop is the reconcile loop every nodekit controller runs: informer events put object keys
// ("namespace/name", or "name" for cluster-scoped objects) on a rate-limited work queue, and workers
// call the controller's reconcile function for each key until it succeeds, backing off exponentially
// on errors (client-go's default controller rate limiter: 5 ms doubling to 1000 s, plus a 10 qps
// bucket), as kube-controller-manager's controllers do.
package workloop

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// ReconcileFunc brings the object named key to its desired state. A non-nil error retries the key
// with backoff; returning nil forgets its backoff.
type ReconcileFunc func(ctx context.Context, key string) error

// Loop is a named work queue and the reconcile function its workers call.
type Loop struct {
	name      string
	queue     workqueue.TypedRateLimitingInterface[string]
	reconcile ReconcileFunc
	log       *slog.Logger
}

// New returns a loop named name (used for logs and the queue's metrics name).
func New(name string, reconcile ReconcileFunc, log *slog.Logger) *Loop {
	if log == nil {
		log = slog.Default()
	}
	return &Loop{
		name:      name,
		reconcile: reconcile,
		log:       log.With("controller", name),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
	}
}

// Log returns the loop's logger (carrying controller=<name>).
func (l *Loop) Log() *slog.Logger { return l.log }

// Add queues key now.
func (l *Loop) Add(key string) { l.queue.Add(key) }

// AddAfter queues key after d (for time-based work such as minReadySeconds or tolerationSeconds).
func (l *Loop) AddAfter(key string, d time.Duration) { l.queue.AddAfter(key, d) }

// Enqueue queues the key of an informer object, including DeletedFinalStateUnknown tombstones.
func (l *Loop) Enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		l.log.Warn("cannot key object", "err", err)
		return
	}
	l.queue.Add(key)
}

// EnqueueController queues the key of obj's controller owner (its ownerReference with controller
// true) when that owner is of kind, e.g. the DaemonSet of a ControllerRevision; obj may be a
// DeletedFinalStateUnknown tombstone.
func (l *Loop) EnqueueController(kind string, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == kind {
			l.queue.Add(KeyOf(m.GetNamespace(), ref.Name))
		}
	}
}

// Handler returns event handlers that queue the object on add, update and delete.
func (l *Loop) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    l.Enqueue,
		UpdateFunc: func(_, obj any) { l.Enqueue(obj) },
		DeleteFunc: l.Enqueue,
	}
}

// Run starts workers that process keys until ctx is done, then shuts the queue down and waits for
// them. Each key is handled by one worker at a time.
func (l *Loop) Run(ctx context.Context, workers int) {
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.processNext(ctx) {
			}
		}()
	}
	l.log.Info("controller started", "workers", workers)
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
}

func (l *Loop) processNext(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	if err := l.reconcile(ctx, key); err != nil {
		if ctx.Err() == nil {
			// A conflict only means the informer's copy was stale: routine under optimistic
			// concurrency, so it is logged at debug; anything else is a warning.
			level := slog.LevelWarn
			if apierrors.IsConflict(err) {
				level = slog.LevelDebug
			}
			l.log.Log(ctx, level, "reconcile failed, will retry", "key", key, "retries", l.queue.NumRequeues(key), "err", err)
			l.queue.AddRateLimited(key)
		}
		return true
	}
	l.queue.Forget(key)
	return true
}

// KeyOf returns the queue key of a namespaced or cluster-scoped object name.
func KeyOf(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
