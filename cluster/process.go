package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// component is one supervised child: `nodekit <name> ...` of the same binary. Its stdout and stderr (JSON
// log lines, see relay) go to <data-dir>/logs/<name>.log and, filtered, to the console; its PID is kept
// in <data-dir>/run/<name>.pid while it runs so that `nodekit down` finds it even if `up` died.
type component struct {
	name string
	exe  string
	args []string
	env  []string
	out  *relay
	log  *slog.Logger

	pidFile string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current process has been waited for
	restarts int
	stopping bool
	done     chan struct{} // closed when the supervision loop ends
}

// Restart back-off after a component exits on its own: 1 s doubling to 30 s.
const (
	restartBackoffMin = time.Second
	restartBackoffMax = 30 * time.Second
)

// start runs the component and keeps it running (restarting it with back-off when it exits) until stop.
// It returns once the first process has started, or the error starting it.
func (c *component) start() error {
	if err := c.spawn(); err != nil {
		return err
	}
	c.done = make(chan struct{})
	go c.supervise()
	return nil
}

func (c *component) spawn() error {
	cmd := exec.Command(c.exe, c.args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdout, cmd.Stderr = c.out, c.out
	// Own process group: a terminal's Ctrl-C reaches `up` only, which then stops the children in
	// reverse order. Pdeathsig: if `up` itself is killed, the children are told to stop too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	exited := make(chan struct{})
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()
	_ = os.WriteFile(c.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	c.log.Info("component started", "pid", cmd.Process.Pid, "args", c.args)
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if !stopping {
			c.log.Error("component exited", "pid", cmd.Process.Pid, "err", exitError(err))
		} else {
			c.log.Info("component stopped", "pid", cmd.Process.Pid, "status", exitError(err))
		}
		close(exited)
	}()
	return nil
}

// supervise restarts the component whenever it exits while not stopping.
func (c *component) supervise() {
	defer close(c.done)
	backoff := restartBackoffMin
	for {
		c.mu.Lock()
		exited := c.exited
		c.mu.Unlock()
		startedAt := time.Now()
		<-exited
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if stopping {
			return
		}
		if time.Since(startedAt) > 2*restartBackoffMax {
			backoff = restartBackoffMin
		}
		c.log.Warn("restarting component", "in", backoff)
		t := time.NewTimer(backoff)
		<-t.C
		backoff = min(2*backoff, restartBackoffMax)
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			return
		}
		c.restarts++
		c.mu.Unlock()
		if err := c.spawn(); err != nil {
			c.log.Error("restart failed", "err", err)
			exited := make(chan struct{})
			close(exited)
			c.mu.Lock()
			c.exited = exited
			c.mu.Unlock()
		}
	}
}

// stop sends SIGTERM to the component's process, waits up to grace for it to exit, then sends SIGKILL.
// Only the PID this component started is signalled.
func (c *component) stop(grace time.Duration) {
	c.mu.Lock()
	c.stopping = true
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
	default:
		c.log.Info("stopping component", "pid", cmd.Process.Pid, "signal", "SIGTERM")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			c.log.Warn("component did not stop in time", "pid", cmd.Process.Pid, "grace", grace, "signal", "SIGKILL")
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if c.done != nil {
		<-c.done
	}
	_ = os.Remove(c.pidFile)
}

// running reports the current PID (0 if not running) and the restart count.
func (c *component) state() (pid int, running bool, restarts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0, false, c.restarts
	}
	select {
	case <-c.exited:
		return c.cmd.Process.Pid, false, c.restarts
	default:
		return c.cmd.Process.Pid, true, c.restarts
	}
}

// wait blocks until ctx ends or the current process exits; it returns an error naming the component in
// the second case.
func (c *component) alive(ctx context.Context) error {
	c.mu.Lock()
	exited := c.exited
	c.mu.Unlock()
	select {
	case <-exited:
		return fmt.Errorf("%s exited (see %s)", c.name, c.out.path)
	default:
		return ctx.Err()
	}
}

func exitError(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.String()
	default:
		return err.Error()
	}
}

// pidFilePath is where the running PID of component name is kept.
func pidFilePath(dataDir, name string) string { return LayoutOf(dataDir).PIDFile(name) }
