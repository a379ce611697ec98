package crictl

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nodekit/nodekit/runtime/cri"
)

// Back-off of the connection retries (--max-retries), as upstream: 500 ms, doubling up to 5 s.
const (
	retryFirstDelay = 500 * time.Millisecond
	retryMaxDelay   = 5 * time.Second
)

// waitForSockets waits until the unix sockets of the runtime endpoint and of imageEndpoint (when set)
// accept connections: it tries once, then up to retries more times (forever when negative) with
// exponential back-off, as upstream crictl retries connecting to an explicitly set endpoint. It returns
// nil once both accept, ctx's error when ctx ends, and nil when the retries are used up, leaving the
// first CRI call to report the unreachable runtime in its usual one line. Malformed endpoints are left
// to cri.Dial as well.
func waitForSockets(ctx context.Context, retries int, endpoint, imageEndpoint string) error {
	var paths []string
	for _, ep := range []string{endpoint, imageEndpoint} {
		if ep == "" {
			continue
		}
		p, err := cri.ParseEndpoint(ep)
		if err != nil {
			return nil
		}
		paths = append(paths, p)
	}
	probe := func() error {
		for _, p := range paths {
			conn, err := net.DialTimeout("unix", p, time.Second)
			if err != nil {
				return err
			}
			conn.Close()
		}
		return nil
	}
	err := probe()
	delay := retryFirstDelay
	for attempt := 1; err != nil && (retries < 0 || attempt <= retries); attempt++ {
		slog.Debug("connecting to the runtime failed; retrying", "attempt", attempt, "maxRetries", retries, "delay", delay, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the runtime at %s: %w", endpoint, ctx.Err())
		case <-time.After(delay):
		}
		err = probe()
		delay = min(2*delay, retryMaxDelay)
	}
	return nil
}
