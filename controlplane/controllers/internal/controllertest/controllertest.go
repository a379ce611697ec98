// Package controllertest runs a controller against a fake clientset in unit tests: it starts the
// shared informers, waits for their caches, runs the controller until the test ends, and polls for
// expected state.
package controllertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/retry"
)

// Logger discards controller logs.
func Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Start starts factory's informers, waits for their caches, then calls run in a goroutine; all stop
// when the test ends. It returns the context they run under.
func Start(t *testing.T, factory informers.SharedInformerFactory, run func(ctx context.Context)) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			t.Fatalf("cache for %v did not sync", typ)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return ctx
}

// Eventually polls cond every 20 ms until it returns nil, failing the test with cond's last error
// after 30 s (the race detector on a loaded 2-core machine slows the controllers several-fold).
func Eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StatusSubresource makes client's updates of the given resources (e.g. "deployments") behave as
// the API server's do, which the fake tracker does not:
//   - "update …/status" changes only .status (the tracker would store the whole object, letting a
//     status write from a stale copy undo a spec change);
//   - an update carrying a metadata.resourceVersion other than the stored one fails with a 409
//     Conflict, and every update stores a new resourceVersion (optimistic concurrency: a
//     controller's write from a stale cache copy must not undo a newer change).
//
// The updates run under one lock, so the read-compare-write of each is atomic.
func StatusSubresource(client *fake.Clientset, resources ...string) {
	var mu sync.Mutex
	for _, res := range resources {
		client.PrependReactor("update", res, func(action k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			incoming := action.(k8stesting.UpdateAction).GetObject()
			in, err := meta.Accessor(incoming)
			if err != nil {
				return true, nil, err
			}
			gvr := action.GetResource()
			stored, err := client.Tracker().Get(gvr, action.GetNamespace(), in.GetName())
			if err != nil {
				return true, nil, err
			}
			sm, err := meta.Accessor(stored)
			if err != nil {
				return true, nil, err
			}
			if rv := in.GetResourceVersion(); rv != "" && rv != sm.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(gvr.GroupResource(), in.GetName(),
					fmt.Errorf("the object has been modified: resourceVersion %s, stored %s", rv, sm.GetResourceVersion()))
			}
			next := 1
			if n, err := strconv.Atoi(sm.GetResourceVersion()); err == nil {
				next = n + 1
			}
			var out runtime.Object
			if action.GetSubresource() == "status" {
				out = stored.DeepCopyObject()
				reflect.ValueOf(out).Elem().FieldByName("Status").Set(reflect.ValueOf(incoming).Elem().FieldByName("Status"))
			} else {
				out = incoming.DeepCopyObject()
			}
			om, _ := meta.Accessor(out)
			om.SetResourceVersion(strconv.Itoa(next))
			if err := client.Tracker().Update(gvr, out, action.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, out.DeepCopyObject(), nil
		})
	}
}

// GenerateNames makes client's creates of the given resources fill metadata.name from generateName
// with a counter suffix, and metadata.uid, as the API server does (the fake tracker does neither).
func GenerateNames(client *fake.Clientset, resources ...string) {
	var seq atomic.Int32
	for _, res := range resources {
		client.PrependReactor("create", res, func(action k8stesting.Action) (bool, runtime.Object, error) {
			m, err := meta.Accessor(action.(k8stesting.CreateAction).GetObject())
			if err != nil {
				return false, nil, nil
			}
			n := strconv.Itoa(int(seq.Add(1)))
			if m.GetName() == "" && m.GetGenerateName() != "" {
				m.SetName(m.GetGenerateName() + n)
			}
			if m.GetUID() == "" {
				m.SetUID(types.UID("uid-" + n))
			}
			return false, nil, nil
		})
	}
}

// Modify reads an object with get, changes it with mutate and writes it back with update, starting
// again from a fresh read when the write fails with a 409 Conflict (as every client of the API
// server must); any other error, or conflicts past client-go's retry.DefaultRetry, fail the test.
func Modify[T any](t *testing.T, get func() (T, error), mutate func(T), update func(T) error) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get()
		if err != nil {
			return err
		}
		mutate(obj)
		return update(obj)
	}); err != nil {
		t.Fatal(err)
	}
}
