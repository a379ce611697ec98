package probes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// runExec is the exec handler: the command runs in the container through Execer with the probe's
// timeout. Exit 0 is Success; another exit code is Failure whose reason is the command's output
// (stdout then stderr, at most 10 KiB) or, when it printed nothing, the exit code; a command killed at
// the timeout is Failure "command ... timed out" (upstream's ExecProbeTimeout behaviour); an exec the
// runtime could not perform is Unknown.
func (pr *Prober) runExec(ctx context.Context, cmd []string, containerID string, timeout time.Duration) Result {
	if pr.exec == nil {
		return unknown("exec probes are not supported: no runtime to exec in")
	}
	if len(cmd) == 0 {
		return unknown("exec probe has no command")
	}
	if _, id, ok := strings.Cut(containerID, "://"); ok {
		containerID = id
	}
	if containerID == "" {
		return unknown("exec probe: no container ID")
	}
	stdout, stderr, code, err := pr.exec.ExecSync(ctx, containerID, cmd, timeout)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return failure("command %q timed out", strings.Join(cmd, " "))
		}
		return unknown("exec %q: %v", strings.Join(cmd, " "), err)
	}
	if code == 0 {
		return success()
	}
	out := append(append([]byte{}, stdout...), stderr...)
	if len(out) > maxBodyBytes {
		out = out[:maxBodyBytes]
	}
	if msg := strings.TrimSpace(string(out)); msg != "" {
		return failure("%s", msg)
	}
	return failure("command %q exited with code %d", strings.Join(cmd, " "), code)
}

// ErrTimeout is returned (wrapped) by Execer implementations when the command outlived its timeout;
// it wraps context.DeadlineExceeded so errors.Is(err, context.DeadlineExceeded) holds.
var ErrTimeout = fmt.Errorf("exec timed out: %w", context.DeadlineExceeded)
