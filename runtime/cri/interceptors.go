package cri

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// callTimeout returns the default deadline for one unary CRI call, or 0 for none, as upstream's remote
// runtime client (k8s.io/cri-client) sets them from the runtime request timeout T:
//   - RunPodSandbox: 2×T (network setup on a loaded node can take long, and a sandbox given up on while
//     the runtime still creates it is a sandbox created twice);
//   - StopContainer with a grace period of N seconds: N seconds plus T;
//   - ExecSync with a command timeout of N seconds: N seconds plus T (the runtime enforces N itself; the
//     margin lets its answer arrive), and no deadline when N is 0 (the CRI meaning of "no timeout");
//   - PullImage: the pull timeout (default none);
//   - every other call, Exec/Attach/PortForward (which only hand out a streaming URL) included: T.
func (c *Client) callTimeout(req any) time.Duration {
	t := c.opts.Timeout
	switch r := req.(type) {
	case *runtimeapi.PullImageRequest:
		return c.opts.PullTimeout
	case *runtimeapi.ExecSyncRequest:
		if r.GetTimeout() <= 0 {
			return 0
		}
		return time.Duration(r.GetTimeout())*time.Second + max(t, 0)
	case *runtimeapi.RunPodSandboxRequest:
		return 2 * t
	case *runtimeapi.StopContainerRequest:
		if t <= 0 {
			return 0
		}
		return time.Duration(max(r.GetTimeout(), 0))*time.Second + t
	default:
		return t
	}
}

// unaryInterceptor applies the default deadline when the caller's context has none and turns
// Unavailable errors, and deadlines that expire while the connection is still not ready, into
// *UnreachableError.
func (c *Client) unaryInterceptor(endpoint string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := ctx.Deadline(); !ok {
			if d := c.callTimeout(req); d > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, d)
				defer cancel()
			}
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if status.Code(err) == codes.DeadlineExceeded {
			// The deadline passed before any connection was up (the socket is not a CRI server, or the
			// first dial was slow): that is an unreachable runtime, not a slow call.
			if st := cc.GetState(); st != connectivity.Ready && st != connectivity.Idle {
				return &UnreachableError{Endpoint: endpoint, Err: status.Errorf(codes.DeadlineExceeded,
					"no connection within the call's deadline (connection %s)", strings.ToLower(st.String()))}
			}
		}
		return wrapUnreachable(endpoint, err)
	}
}

// streamInterceptor turns Unavailable errors of stream creation (GetContainerEvents) into
// *UnreachableError. Streams get no default deadline: they live as long as the caller's context.
func streamInterceptor(endpoint string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return s, wrapUnreachable(endpoint, err)
	}
}

func wrapUnreachable(endpoint string, err error) error {
	if err != nil && status.Code(err) == codes.Unavailable {
		return &UnreachableError{Endpoint: endpoint, Err: err}
	}
	return err
}

// unavailableReason extracts the transport's reason from a gRPC Unavailable error, e.g.
// `connection error: desc = "transport: Error while dialing: dial unix /x.sock: connect: no such file
// or directory"` becomes "dial unix /x.sock: connect: no such file or directory".
func unavailableReason(err error) string {
	msg := status.Convert(err).Message()
	if i := strings.Index(msg, "desc = "); i >= 0 {
		msg = strings.Trim(msg[i+len("desc = "):], `"`)
	}
	msg = strings.TrimPrefix(msg, "transport: ")
	msg = strings.TrimPrefix(msg, "Error while dialing: ")
	msg = strings.TrimPrefix(msg, "error while dialing: ")
	if msg == "" {
		msg = "unavailable"
	}
	return msg
}
