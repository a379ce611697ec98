// Package controllertest runs a controller against a fake clientset in unit tests: it starts the
// shared informers, waits for their caches, runs the controller until the test ends, and polls for
// expected state.
package controllertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/informers"
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
// after 10 s.
func Eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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
