package prober

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/probes"
)

// execGrace is how long after the command's timeout the CRI call itself may take (the runtime kills the
// command at the timeout; this margin lets its answer arrive).
const execGrace = 5 * time.Second

// CRIExecer runs exec probes through CRI ExecSync (runtime.v1.RuntimeService/ExecSync) and implements
// probes.Execer. The runtime enforces the timeout, rounded up to whole seconds as the CRI field is; a
// DeadlineExceeded answer is reported as probes.ErrTimeout.
type CRIExecer struct {
	Runtime runtimeapi.RuntimeServiceClient
}

// ExecSync runs cmd in container containerID (a CRI ID) and returns its output and exit code.
func (e CRIExecer) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
	secs := int64(math.Ceil(timeout.Seconds()))
	if secs < 1 {
		secs = 1
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+execGrace)
	defer cancel()
	resp, err := e.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: secs})
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, -1, fmt.Errorf("%w: %v", probes.ErrTimeout, err)
		}
		return nil, nil, -1, err
	}
	return resp.Stdout, resp.Stderr, resp.ExitCode, nil
}
