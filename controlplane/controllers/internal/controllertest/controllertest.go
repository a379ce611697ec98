// Package controllertest runs a controller against a fake clientset in unit tests: it starts the
// shared informers, waits for their caches, runs the controller until the test ends, and polls for
// expected state.
package controllertest

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// StatusSubresource makes client's "update …/status" calls on the given resources (e.g. "deployments")
// change only .status, as the API server does; the fake tracker would otherwise store the whole
// object, letting a status write from a stale copy undo a spec change.
func StatusSubresource(client *fake.Clientset, resources ...string) {
	for _, res := range resources {
		client.PrependReactor("update", res, func(action k8stesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() != "status" {
				return false, nil, nil
			}
			incoming := action.(k8stesting.UpdateAction).GetObject()
			m, err := meta.Accessor(incoming)
			if err != nil {
				return true, nil, err
			}
			stored, err := client.Tracker().Get(action.GetResource(), action.GetNamespace(), m.GetName())
			if err != nil {
				return true, nil, err
			}
			merged := stored.DeepCopyObject()
			reflect.ValueOf(merged).Elem().FieldByName("Status").Set(reflect.ValueOf(incoming).Elem().FieldByName("Status"))
			if err := client.Tracker().Update(action.GetResource(), merged, action.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, merged, nil
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
