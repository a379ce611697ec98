package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/nodekit/nodekit/internal/components"
	"github.com/nodekit/nodekit/internal/logging"
)

// FlagRunComponent is the hidden flag of `nodekit server` that makes the process one component of a
// server rather than the server (RunComponent): the argv of a child is the server's own Args() plus
// --run-component=<name>, so parent and child read the same settings.
const FlagRunComponent = "run-component"

// Child restart back-off: 1 s doubling to 30 s, back to 1 s after a process ran for a minute.
const (
	childBackoffMin = time.Second
	childBackoffMax = 30 * time.Second
	// childStopGrace is how long a child has between SIGTERM and SIGKILL when the server stops.
	childStopGrace = 10 * time.Second
)

// child is one component the server runs as a child process of Executable: kube-scheduler or
// kube-controller-manager. Its output goes to its own log file, rotated by size; each start is recorded in the
// components directory (its mirror pod's PID, start time and restart count).
type child struct {
	name, loop       string // component name (kube-scheduler) and readyz/loop name (scheduler)
	exe              string
	args             []string
	logFile, records string

	mu      sync.Mutex
	running bool
	// out is the rotating log file (internal/logging.RotatingFile) every process of the child writes
	// through, across restarts; opened by the first start, closed when run returns.
	out io.WriteCloser
}

// check is the child's /readyz check (/readyz/<loop>): failing while no process of it runs.
func (ch *child) check() healthz.HealthChecker {
	return healthz.NamedCheck(ch.loop, func(*http.Request) error {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		if !ch.running {
			return fmt.Errorf("%s is not running (starting or restarting)", ch.name)
		}
		return nil
	})
}

// run keeps the child running until ctx ends: it starts the process, waits for it, and when it exits
// while ctx is live, logs why and starts it again after the back-off. When ctx ends the process gets
// SIGTERM, and SIGKILL after childStopGrace; run returns once it has exited.
func (ch *child) run(ctx context.Context) {
	log := slog.Default().With("component", ch.name)
	defer func() {
		if ch.out != nil {
			ch.out.Close()
		}
	}()
	backoff := childBackoffMin
	for ctx.Err() == nil {
		started := time.Now()
		err := ch.once(ctx, log)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 2*childBackoffMax {
			backoff = childBackoffMin
		}
		log.Error("component exited; restarting it", "err", err, "in", backoff, "logFile", ch.logFile)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, childBackoffMax)
	}
}

// once runs one process of the child until it exits, and returns why. The process's stdout and
// stderr are one pipe the server copies into the child's rotating log file (Wait returns once the copy
// has drained it).
func (ch *child) once(ctx context.Context, log *slog.Logger) error {
	if ch.out == nil {
		out, err := logging.RotatingFile(ch.logFile)
		if err != nil {
			return fmt.Errorf("open log file: %w", err)
		}
		ch.out = out
	}
	cmd := exec.CommandContext(ctx, ch.exe, ch.args...)
	cmd.Stdout, cmd.Stderr = ch.out, ch.out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = childStopGrace
	// If the server dies without stopping it, the child is told to stop too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	rec, err := components.Started(ch.records, ch.name, cmd.Process.Pid, time.Now(), append([]string{ch.exe}, ch.args...), ch.logFile)
	if err != nil {
		log.Error("component record not written", "err", err)
	}
	log.Info("component started", "pid", cmd.Process.Pid, "restarts", rec.Restarts, "logFile", ch.logFile)
	ch.setRunning(true)
	err = cmd.Wait()
	ch.setRunning(false)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("pid %d: %s", cmd.Process.Pid, exit.String())
	}
	if err == nil {
		return fmt.Errorf("pid %d: exit status 0", cmd.Process.Pid)
	}
	return fmt.Errorf("pid %d: %w", cmd.Process.Pid, err)
}

func (ch *child) setRunning(v bool) {
	ch.mu.Lock()
	ch.running = v
	ch.mu.Unlock()
}
