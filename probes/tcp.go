package probes

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"time"
)

// dialer is the dialer of TCP, HTTP and gRPC probes. It sets SO_LINGER to 1 s, as upstream's probe
// dialer does, so that closing a probe connection does not leave sockets in TIME_WAIT: a node probing
// hundreds of containers every second would otherwise fill the ephemeral port range.
func dialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
		}); err != nil {
			return err
		}
		return serr
	}}
}

// runTCP is the tcpSocket handler: a completed TCP connect within timeout is Success; a refused,
// unreachable or timed-out connect is Failure with the dial error.
func runTCP(ctx context.Context, host string, port int, timeout time.Duration) Result {
	if host == "" {
		return unknown("no host to probe: the pod has no IP yet")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dialer().DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return failure("%v", err)
	}
	conn.Close()
	return success()
}
