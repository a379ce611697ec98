package cri

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, want, wantErr string
	}{
		{in: "unix:///run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{in: "/run/x.sock", want: "/run/x.sock"},
		{in: "unix:/run/x.sock", want: "/run/x.sock"},
		{in: "  unix:///a/b/../c.sock ", want: "/a/c.sock"},
		{in: "", wantErr: "CRI endpoint is empty"},
		{in: "tcp://127.0.0.1:1234", wantErr: `scheme "tcp" is not supported`},
		{in: "npipe:////./pipe/containerd", wantErr: `scheme "npipe" is not supported`},
		{in: "unix://run/x.sock", wantErr: "did you mean unix:///run/x.sock?"},
		{in: "unix://", wantErr: "need an absolute path"},
		{in: "unix:", wantErr: "socket path is empty"},
	} {
		got, err := ParseEndpoint(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseEndpoint(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if u, err := EndpointURL("/run/x.sock"); err != nil || u != "unix:///run/x.sock" {
		t.Errorf("EndpointURL = %q, %v", u, err)
	}
}

func TestDialUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "missing.sock")
	_, err := Dial(context.Background(), "unix://"+sock, WithTimeout(2*time.Second))
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("Dial to missing socket: got %T %v, want *UnreachableError", err, err)
	}
	want := "runtime not reachable at unix://" + sock + ": dial unix " + sock + ": connect: no such file or directory"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err.Error(), want)
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("status.Code = %v, want Unavailable", status.Code(err))
	}
}

// TestDialNotCRI: a socket that accepts connections but never speaks gRPC (some other daemon's socket)
// is reported as an unreachable runtime when the deadline passes, not as a slow call.
func TestDialNotCRI(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = Dial(context.Background(), "unix://"+sock, WithTimeout(500*time.Millisecond))
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "runtime not reachable at unix://"+sock+": no connection within") {
		t.Fatalf("Dial to a silent socket: got %T %v, want *UnreachableError", err, err)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("status.Code = %v, want DeadlineExceeded", status.Code(err))
	}
}

// fakeRuntime is a RuntimeService that answers Version with a configurable API version and sleeps in
// ListContainers, to test the client's checks and deadlines without a real runtime.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	apiVersion string
	sleep      time.Duration
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: f.apiVersion}, nil
}

func (f *fakeRuntime) ListContainers(ctx context.Context, _ *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	select {
	case <-time.After(f.sleep):
		return &runtimeapi.ListContainersResponse{}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func serveFake(t *testing.T, rs runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	if rs != nil {
		runtimeapi.RegisterRuntimeServiceServer(s, rs)
	}
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return sock
}

func TestDialChecksVersion(t *testing.T) {
	ctx := context.Background()
	sock := serveFake(t, nil)
	_, err := Dial(ctx, sock)
	if err == nil || !strings.Contains(err.Error(), "runtime at unix://"+sock+" does not serve CRI v1") {
		t.Errorf("Dial to a server without RuntimeService: %v", err)
	}

	sock = serveFake(t, &fakeRuntime{apiVersion: "v1alpha2"})
	_, err = Dial(ctx, sock)
	if err == nil || !strings.Contains(err.Error(), `speaks CRI "v1alpha2", nodekit needs "v1"`) {
		t.Errorf("Dial to a v1alpha2 runtime: %v", err)
	}
}

func TestTimeoutsAndCgroupDriverFallback(t *testing.T) {
	ctx := context.Background()
	sock := serveFake(t, &fakeRuntime{apiVersion: "v1", sleep: time.Second})
	c, err := Dial(ctx, sock, WithTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Endpoint() != "unix://"+sock || c.ImageEndpoint() != c.Endpoint() {
		t.Errorf("endpoints = %q, %q", c.Endpoint(), c.ImageEndpoint())
	}
	start := time.Now()
	_, err = c.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 900*time.Millisecond {
		t.Errorf("ListContainers with a 100ms default timeout: %v after %v", err, time.Since(start))
	}
	// A caller's own deadline wins over the default.
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := c.Runtime().ListContainers(cctx, &runtimeapi.ListContainersRequest{}); err != nil {
		t.Errorf("ListContainers with a caller deadline of 3s: %v", err)
	}

	_, err = c.CgroupDriver(ctx)
	if !errors.Is(err, ErrRuntimeConfigUnimplemented) || !strings.Contains(err.Error(), "fall back") {
		t.Errorf("CgroupDriver on a runtime without RuntimeConfig: %v", err)
	}
}

func TestCallTimeout(t *testing.T) {
	c := &Client{opts: Options{Timeout: DefaultTimeout, PullTimeout: DefaultPullTimeout}}
	for _, tc := range []struct {
		req  any
		want time.Duration
	}{
		{&runtimeapi.PullImageRequest{}, 0},
		{&runtimeapi.ExecSyncRequest{Timeout: 5}, 2*time.Minute + 5*time.Second},
		{&runtimeapi.ExecSyncRequest{}, 0},
		{&runtimeapi.RunPodSandboxRequest{}, 4 * time.Minute},
		{&runtimeapi.StopContainerRequest{Timeout: 30}, 2*time.Minute + 30*time.Second},
		{&runtimeapi.ExecRequest{}, 2 * time.Minute},
		{&runtimeapi.ListPodSandboxRequest{}, 2 * time.Minute},
	} {
		if got := c.callTimeout(tc.req); got != tc.want {
			t.Errorf("callTimeout(%T) = %v, want %v", tc.req, got, tc.want)
		}
	}
	// A configured request timeout scales them all; a pull timeout applies to pulls only.
	c.opts = Options{Timeout: 10 * time.Second, PullTimeout: time.Minute}
	if got := c.callTimeout(&runtimeapi.RunPodSandboxRequest{}); got != 20*time.Second {
		t.Errorf("RunPodSandbox with a 10s request timeout: %v, want 20s", got)
	}
	if got := c.callTimeout(&runtimeapi.PullImageRequest{}); got != time.Minute {
		t.Errorf("PullImage with a 1m pull timeout: %v", got)
	}
	// No request timeout: no deadline (ExecSync keeps its command's).
	c.opts = Options{}
	if got := c.callTimeout(&runtimeapi.ExecSyncRequest{Timeout: 3}); got != 3*time.Second {
		t.Errorf("ExecSync of 3s without a request timeout = %v, want 3s", got)
	}
	for _, req := range []any{&runtimeapi.RunPodSandboxRequest{}, &runtimeapi.StopContainerRequest{Timeout: 3}, &runtimeapi.ListContainersRequest{}} {
		if got := c.callTimeout(req); got != 0 {
			t.Errorf("callTimeout(%T) without a request timeout = %v, want none", req, got)
		}
	}
}

// slowVersion is a RuntimeService whose Version never answers before the caller gives up.
type slowVersion struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (slowVersion) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func TestDialTimeoutNamesEndpoint(t *testing.T) {
	sock := serveFake(t, slowVersion{})
	_, err := Dial(context.Background(), sock, WithTimeout(200*time.Millisecond))
	if status.Code(err) != codes.DeadlineExceeded || !strings.HasPrefix(err.Error(), "runtime at unix://"+sock+": Version: ") {
		t.Errorf("Dial to a runtime that does not answer: %v", err)
	}
}

// fakeImages is an ImageService answering ListImages with one image named after its endpoint.
type fakeImages struct {
	runtimeapi.UnimplementedImageServiceServer
	name string
}

func (f fakeImages) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{{Id: f.name}}}, nil
}

func TestImageEndpoint(t *testing.T) {
	rsock := serveFake(t, &fakeRuntime{apiVersion: "v1"})
	isock := filepath.Join(t.TempDir(), "images.sock")
	l, err := net.Listen("unix", isock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(s, fakeImages{name: "image-endpoint"})
	go s.Serve(l)
	t.Cleanup(s.Stop)

	c, err := Dial(context.Background(), rsock, WithImageEndpoint("unix://"+isock))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ImageEndpoint() != "unix://"+isock {
		t.Errorf("ImageEndpoint = %q", c.ImageEndpoint())
	}
	resp, err := c.Image().ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	if err != nil || len(resp.Images) != 1 || resp.Images[0].Id != "image-endpoint" {
		t.Errorf("ListImages through the image endpoint: %v, %v", resp, err)
	}
	if _, err := Dial(context.Background(), rsock, WithImageEndpoint("tcp://x:1")); err == nil || !strings.HasPrefix(err.Error(), "image endpoint: ") {
		t.Errorf("bad image endpoint: %v", err)
	}
}
