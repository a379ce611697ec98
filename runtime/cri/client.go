// Package cri is nodekit's client for the Container Runtime Interface v1 (k8s.io/cri-api runtime.v1): it
// dials a runtime's unix socket, checks that the runtime speaks CRI v1, and hands out the generated
// RuntimeService and ImageService gRPC clients with per-call default timeouts and clear connection errors.
//
// Every CRI method is reached through Client.Runtime() and Client.Image(); this package adds no look-alike
// wrappers for them, so callers (the kubelet, crictl, tests) use the CRI types and semantics directly
// (see https://github.com/kubernetes/cri-api/blob/master/pkg/apis/runtime/v1/api.proto).
package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// DefaultTimeout bounds every unary CRI call whose context has no deadline, except those callTimeout
	// names: upstream's kubelet default --runtime-request-timeout (runtimeRequestTimeout, 2 min).
	DefaultTimeout = 2 * time.Minute
	// DefaultPullTimeout bounds ImageService.PullImage calls whose context has no deadline: none (0), as
	// upstream's kubelet, whose pulls run until the caller cancels them (a large image on a slow
	// registry takes what it takes).
	DefaultPullTimeout time.Duration = 0
	// APIVersion is the CRI API version nodekit speaks; Version answers must report it.
	APIVersion = "v1"
	// maxMsgSize is the largest CRI message accepted, as in the kubelet's remote runtime client (16 MiB):
	// ListContainers on a busy node exceeds gRPC's 4 MiB default.
	maxMsgSize = 16 << 20
)

// ErrRuntimeConfigUnimplemented is returned (wrapped) by Client.CgroupDriver when the runtime does not
// implement RuntimeService.RuntimeConfig (added to CRI v1 for Kubernetes 1.28, KEP-4033; containerd 1.6
// and 1.7 answer Unimplemented). Callers then fall back to their configured cgroup driver, as the kubelet does.
var ErrRuntimeConfigUnimplemented = errors.New("runtime does not implement RuntimeConfig")

// UnreachableError reports that the runtime's socket could not be reached (gRPC code Unavailable, or
// DeadlineExceeded when the call's deadline passed with no connection up, e.g. a socket that accepts but
// does not speak gRPC). Its message reads "runtime not reachable at unix:///x.sock: <reason>". It wraps
// the gRPC status error, so status.Code(err) still yields that code.
type UnreachableError struct {
	// Endpoint is the endpoint as the caller named it, in unix:///path form.
	Endpoint string
	// Err is the underlying gRPC error.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("runtime not reachable at %s: %s", e.Endpoint, unavailableReason(e.Err))
}

// Unwrap returns the gRPC status error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Options tune a Client. The zero value is not useful; Dial starts from defaults and applies Option funcs.
type Options struct {
	// Timeout bounds unary calls without a context deadline (DefaultTimeout; RunPodSandbox gets twice
	// that, StopContainer that plus its grace period, ExecSync that plus its command timeout). Zero or
	// negative disables it.
	Timeout time.Duration
	// PullTimeout bounds PullImage calls without a context deadline (DefaultPullTimeout; zero: none).
	PullTimeout time.Duration
	// ImageEndpoint, when set, serves the ImageService on its own socket (crictl's
	// IMAGE_SERVICE_ENDPOINT); by default both services share the runtime endpoint.
	ImageEndpoint string
	// SkipVersionCheck makes Dial return without calling Version, so it succeeds while the runtime is
	// still down; the first call then reports an UnreachableError.
	SkipVersionCheck bool
}

// Option changes Options.
type Option func(*Options)

// WithTimeout sets the default deadline of unary calls (see Options.Timeout).
func WithTimeout(d time.Duration) Option { return func(o *Options) { o.Timeout = d } }

// WithPullTimeout sets the default deadline of PullImage calls (see Options.PullTimeout).
func WithPullTimeout(d time.Duration) Option { return func(o *Options) { o.PullTimeout = d } }

// WithImageEndpoint serves the ImageService from another endpoint (see Options.ImageEndpoint).
func WithImageEndpoint(endpoint string) Option {
	return func(o *Options) { o.ImageEndpoint = endpoint }
}

// WithoutVersionCheck makes Dial lazy (see Options.SkipVersionCheck).
func WithoutVersionCheck() Option { return func(o *Options) { o.SkipVersionCheck = true } }

// Client is a connection to one CRI v1 runtime. It is safe for concurrent use; Close releases it.
type Client struct {
	endpoint      string
	imageEndpoint string
	opts          Options
	conns         []*grpc.ClientConn
	runtime       runtimeapi.RuntimeServiceClient
	image         runtimeapi.ImageServiceClient
}

// Dial connects to the CRI runtime at endpoint (see ParseEndpoint for accepted forms) and, unless
// WithoutVersionCheck is given, calls RuntimeService.Version within ctx (bounded by the default timeout)
// to check that the runtime answers and speaks CRI v1.
//
// Errors: a malformed endpoint (ParseEndpoint's error); *UnreachableError when nothing answers on the
// socket ("runtime not reachable at unix:///x.sock: dial unix /x.sock: connect: no such file or
// directory"); an error naming the endpoint when the runtime does not serve runtime.v1 or reports
// another API version. On error nothing stays open.
func Dial(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	o := Options{Timeout: DefaultTimeout, PullTimeout: DefaultPullTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Client{opts: o}
	var err error
	if c.endpoint, err = EndpointURL(endpoint); err != nil {
		return nil, err
	}
	c.imageEndpoint = c.endpoint
	if o.ImageEndpoint != "" {
		if c.imageEndpoint, err = EndpointURL(o.ImageEndpoint); err != nil {
			return nil, fmt.Errorf("image endpoint: %w", err)
		}
	}
	rconn, err := c.connect(c.endpoint)
	if err != nil {
		return nil, err
	}
	c.conns = append(c.conns, rconn)
	iconn := rconn
	if c.imageEndpoint != c.endpoint {
		if iconn, err = c.connect(c.imageEndpoint); err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, iconn)
	}
	c.runtime = runtimeapi.NewRuntimeServiceClient(rconn)
	c.image = runtimeapi.NewImageServiceClient(iconn)
	if !o.SkipVersionCheck {
		if _, err := c.Version(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// reconnectBackoff bounds how long a restarted runtime waits for the client to notice it: gRPC's default
// backoff grows to 120 s, upstream's cri-client caps it at 3 s from a 100 ms base, and so does nodekit.
var reconnectBackoff = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// connect creates a lazy gRPC client connection to a unix:///path endpoint with nodekit's interceptors.
func (c *Client) connect(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(reconnectBackoff),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
		grpc.WithUnaryInterceptor(c.unaryInterceptor(endpoint)),
		grpc.WithStreamInterceptor(streamInterceptor(endpoint)),
	)
	if err != nil {
		return nil, fmt.Errorf("CRI endpoint %s: %w", endpoint, err)
	}
	return conn, nil
}

// Endpoint returns the runtime endpoint in unix:///path form.
func (c *Client) Endpoint() string { return c.endpoint }

// ImageEndpoint returns the image service endpoint in unix:///path form (the runtime endpoint unless
// WithImageEndpoint was given).
func (c *Client) ImageEndpoint() string { return c.imageEndpoint }

// Runtime returns the CRI v1 RuntimeService client (sandboxes, containers, exec, stats, events, ...).
// Calls without a context deadline get the default timeout; connection failures come back as
// *UnreachableError.
func (c *Client) Runtime() runtimeapi.RuntimeServiceClient { return c.runtime }

// Image returns the CRI v1 ImageService client (list, status, pull, remove, filesystem info). PullImage
// calls without a context deadline get the pull timeout.
func (c *Client) Image() runtimeapi.ImageServiceClient { return c.image }

// Close closes the gRPC connections. Calls in flight fail with codes.Canceled.
func (c *Client) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	c.conns = nil
	return errors.Join(errs...)
}

// Version calls RuntimeService.Version and checks that the runtime speaks CRI v1 (RuntimeApiVersion
// "v1"). The response names the runtime (e.g. RuntimeName "containerd", RuntimeVersion "v1.6.20").
// Errors: *UnreachableError; "runtime at X does not serve CRI v1" when the service is Unimplemented (for
// example containerd with its CRI plugin disabled); a version mismatch naming both versions; any other
// failure (e.g. the deadline passing) as "runtime at X: Version: <gRPC error>".
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	resp, err := c.runtime.Version(ctx, &runtimeapi.VersionRequest{Version: APIVersion})
	if err != nil {
		var ue *UnreachableError
		switch {
		case errors.As(err, &ue):
			return nil, err
		case status.Code(err) == codes.Unimplemented:
			return nil, fmt.Errorf("runtime at %s does not serve CRI %s (runtime.v1.RuntimeService): %s", c.endpoint, APIVersion, status.Convert(err).Message())
		default:
			return nil, fmt.Errorf("runtime at %s: Version: %w", c.endpoint, err)
		}
	}
	if resp.GetRuntimeApiVersion() != APIVersion {
		return nil, fmt.Errorf("runtime at %s (%s %s) speaks CRI %q, nodekit needs %q", c.endpoint,
			resp.GetRuntimeName(), resp.GetRuntimeVersion(), resp.GetRuntimeApiVersion(), APIVersion)
	}
	return resp, nil
}

// CgroupDriver asks the runtime which cgroup driver it uses, through RuntimeService.RuntimeConfig (CRI
// v1, KEP-4033), and returns "systemd" or "cgroupfs". When the runtime answers Unimplemented (containerd
// 1.6 and 1.7), the error wraps ErrRuntimeConfigUnimplemented and says so; callers fall back to their
// configured driver (the kubelet's --cgroup-driver behaviour).
func (c *Client) CgroupDriver(ctx context.Context) (string, error) {
	resp, err := c.runtime.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return "", fmt.Errorf("runtime at %s: %w (CRI v1 RuntimeConfig needs containerd >= 2.0); fall back to the configured cgroup driver", c.endpoint, ErrRuntimeConfigUnimplemented)
		}
		return "", fmt.Errorf("RuntimeConfig: %w", err)
	}
	switch d := resp.GetLinux().GetCgroupDriver(); d {
	case runtimeapi.CgroupDriver_SYSTEMD:
		return "systemd", nil
	case runtimeapi.CgroupDriver_CGROUPFS:
		return "cgroupfs", nil
	default:
		return "", fmt.Errorf("runtime at %s reports unknown cgroup driver %v", c.endpoint, d)
	}
}
