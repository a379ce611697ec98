package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
)

// Names of the in-process control loops, as their /readyz checks and log lines call them.
const (
	SchedulerLoop         = "scheduler"
	ControllerManagerLoop = "controller-manager"
)

// FaultStopEnv names the fault-injection setting "<loop>@<duration>" (e.g. "scheduler@5s"): that loop's
// context is cancelled the given time after it started, so its Run returns while the server runs — the
// path a loop that stops on its own takes. For fault tests only (docs/reliability.md); unset in
// production.
const FaultStopEnv = "NODEKIT_FAULT_STOP"

// loop is one control loop running beside the API server in this process.
type loop struct {
	name string
	run  func(ctx context.Context) error

	mu      sync.Mutex
	running bool
	stopErr error // why it stopped; set once it has
}

// check is the loop's /readyz check (/readyz/<name>): failing until the loop runs and once it stopped.
func (l *loop) check() healthz.HealthChecker {
	return healthz.NamedCheck(l.name, func(*http.Request) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case l.stopErr != nil:
			return fmt.Errorf("%s stopped: %w", l.name, l.stopErr)
		case !l.running:
			return fmt.Errorf("%s not started", l.name)
		}
		return nil
	})
}

// start runs the loop in a goroutine. If it returns (an error, nil, or a panic, turned into an error
// with its stack) while ctx is still live, the loop is marked stopped and its error sent on stopped.
func (l *loop) start(ctx context.Context, stopped chan<- error) {
	runCtx := ctx
	if after, ok := faultStopAfter(l.name); ok {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithCancel(ctx)
		time.AfterFunc(after, func() {
			slog.Warn("fault injection: stopping a control loop", "component", l.name, "env", FaultStopEnv)
			cancel()
		})
	}
	l.mu.Lock()
	l.running = true
	l.mu.Unlock()
	go func() {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
				}
			}()
			return l.run(runCtx)
		}()
		if ctx.Err() != nil {
			return // the server is shutting down
		}
		if err == nil {
			err = fmt.Errorf("returned while the server runs")
		}
		l.mu.Lock()
		l.running, l.stopErr = false, err
		l.mu.Unlock()
		stopped <- fmt.Errorf("%s stopped: %w", l.name, err)
	}()
}

// faultStopAfter reads FaultStopEnv for the loop name.
func faultStopAfter(name string) (time.Duration, bool) {
	v := os.Getenv(FaultStopEnv)
	loopName, after, ok := strings.Cut(v, "@")
	if !ok || loopName != name {
		return 0, false
	}
	d, err := time.ParseDuration(after)
	if err != nil {
		slog.Error("ignoring a malformed fault injection setting", "env", FaultStopEnv, "value", v, "err", err)
		return 0, false
	}
	return d, true
}
