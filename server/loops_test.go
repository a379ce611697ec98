package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestLoopStopsAreReported: a loop that returns an error, returns nil or panics while the server runs
// is reported on stopped with its name and fails its readyz check; one stopping because the server
// shuts down is not reported.
func TestLoopStopsAreReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context) error
		want string
	}{
		{"error", func(context.Context) error { return errors.New("cache sync failed") }, "x stopped: cache sync failed"},
		{"nil", func(context.Context) error { return nil }, "x stopped: returned while the server runs"},
		{"panic", func(context.Context) error { panic("boom") }, "x stopped: panic: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			l := &loop{name: "x", run: func(ctx context.Context) error { <-release; return tc.run(ctx) }}
			if err := l.check().Check(nil); err == nil || err.Error() != "x not started" {
				t.Errorf("check before start = %v", err)
			}
			stopped := make(chan error, 1)
			l.start(context.Background(), stopped)
			if err := l.check().Check(nil); err != nil {
				t.Errorf("check while running = %v", err)
			}
			close(release)
			select {
			case err := <-stopped:
				if !strings.HasPrefix(err.Error(), tc.want) {
					t.Errorf("stopped: %v, want %q", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no stop reported")
			}
			if err := l.check().Check(nil); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("check after the stop = %v, want %q", err, tc.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	l := &loop{name: "x", run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	l.start(ctx, stopped)
	cancel()
	select {
	case err := <-stopped:
		t.Errorf("a loop stopping with the server was reported: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestFaultStopEnv: "<loop>@<duration>" applies to that loop only; malformed values are ignored.
func TestFaultStopEnv(t *testing.T) {
	t.Setenv(FaultStopEnv, "scheduler@2s")
	if d, ok := faultStopAfter(SchedulerLoop); !ok || d != 2*time.Second {
		t.Errorf("scheduler: %v %v", d, ok)
	}
	if _, ok := faultStopAfter(ControllerManagerLoop); ok {
		t.Error("controller-manager affected by a scheduler setting")
	}
	t.Setenv(FaultStopEnv, "scheduler@soon")
	if _, ok := faultStopAfter(SchedulerLoop); ok {
		t.Error("malformed duration applied")
	}
}
