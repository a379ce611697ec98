package probes

import (
	"context"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// runGRPC is the grpc handler: grpc.health.v1.Health/Check for service (empty: the server's overall
// health) over plaintext (as upstream, probes carry no credentials), bounded by timeout. SERVING is
// Success; any other status, a refused connection, a timeout or a server without the health service is
// Failure with upstream's wording.
func (pr *Prober) runGRPC(ctx context.Context, host string, port int, service string, timeout time.Duration) Result {
	if host == "" {
		return unknown("no host to probe: the pod has no IP yet")
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(pr.userAgent),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dialer().DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		return unknown("grpc client for %s: %v", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unimplemented:
			return failure("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())
		case codes.DeadlineExceeded:
			return failure("timeout: health rpc did not complete within %v", timeout)
		case codes.Unavailable:
			return failure("error: failed to connect service at %q: %s", addr, st.Message())
		}
		return failure("error: health rpc probe failed: %v", err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return failure("service unhealthy (responded with %q)", s.String())
	}
	return success()
}
