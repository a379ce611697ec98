package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// hostPort splits a test server's address.
func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func httpProbe(port intstr.IntOrString, path string, scheme v1.URIScheme, headers ...v1.HTTPHeader) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
		Path: path, Port: port, Scheme: scheme, HTTPHeaders: headers}}}
}

// refusedPort returns a loopback port nothing listens on (a listener opened and closed).
func refusedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, p := hostPort(t, l.Addr().String())
	l.Close()
	return p
}

func expect(t *testing.T, got Result, want Status, reasonHas string) {
	t.Helper()
	if got.Status != want {
		t.Fatalf("status = %s, want %s (result %v)", got.Status, want, got)
	}
	if reasonHas != "" && !strings.Contains(got.Reason, reasonHas) {
		t.Fatalf("reason %q does not contain %q", got.Reason, reasonHas)
	}
	if want == Success && got.Reason != "" {
		t.Fatalf("success with reason %q", got.Reason)
	}
}

func TestHTTP(t *testing.T) {
	var hits atomic.Int32
	var lastUA, lastAccept, lastHost, lastCustom atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		lastUA.Store(r.UserAgent())
		lastAccept.Store(r.Header.Get("Accept"))
		lastHost.Store(r.Host)
		lastCustom.Store(r.Header.Get("X-Custom"))
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "secret-body")
	})
	mux.HandleFunc("/404", http.NotFound)
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	})
	// /big offers 64 MiB; the probe reads at most 10 KiB and hangs up, so the handler's writes fail
	// long before the end (only socket buffers absorb the rest).
	bigWritten := make(chan int, 1)
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		n := 0
		for n < 64<<20 {
			k, err := w.Write(chunk)
			n += k
			if err != nil {
				break
			}
		}
		bigWritten <- n
	})
	mux.HandleFunc("/redirect-ok", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/redirect-fail", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/fail", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })

	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	_, otherPort := hostPort(t, other.Listener.Addr().String())
	// "localhost" is another host name than the probed 127.0.0.1, as a pod IP differs from any other.
	mux.HandleFunc("/redirect-away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+strconv.Itoa(otherPort)+"/", http.StatusFound)
	})

	srv := httptest.NewServer(mux)
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	host, port := hostPort(t, srv.Listener.Addr().String())
	_, tlsPort := hostPort(t, tlsSrv.Listener.Addr().String())
	pr := New(nil)
	ctx := context.Background()
	target := Target{PodIP: host, Container: &v1.Container{Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}, {Name: "https", ContainerPort: int32(tlsPort)}}}}

	t.Run("success", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/ok", v1.URISchemeHTTP), target), Success, "")
		if ua := lastUA.Load().(string); ua != UserAgent() || !strings.HasPrefix(ua, "kube-probe/1.") || strings.Count(ua, ".") != 1 {
			t.Fatalf("User-Agent %q, want %q (kube-probe/<major>.<minor>)", ua, UserAgent())
		}
		if a := lastAccept.Load().(string); a != "*/*" {
			t.Fatalf("Accept %q", a)
		}
	})
	t.Run("named port and headers", func(t *testing.T) {
		r := pr.Run(ctx, httpProbe(intstr.FromString("http"), "/ok", v1.URISchemeHTTP,
			v1.HTTPHeader{Name: "Host", Value: "svc.example"}, v1.HTTPHeader{Name: "X-Custom", Value: "v1"},
			v1.HTTPHeader{Name: "User-Agent", Value: "mine"}), target)
		expect(t, r, Success, "")
		if h, c, ua := lastHost.Load(), lastCustom.Load(), lastUA.Load(); h != "svc.example" || c != "v1" || ua != "mine" {
			t.Fatalf("host=%v custom=%v ua=%v", h, c, ua)
		}
	})
	t.Run("https without verification", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromString("https"), "/ok", v1.URISchemeHTTPS), target), Success, "")
	})
	t.Run("https failure", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(tlsPort)), "/fail", v1.URISchemeHTTPS), target), Failure, "statuscode: 500")
	})
	t.Run("failure keeps body out", func(t *testing.T) {
		r := pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/fail", v1.URISchemeHTTP), target)
		expect(t, r, Failure, "HTTP probe failed with statuscode: 500")
		if strings.Contains(r.Reason, "secret") {
			t.Fatalf("reason leaks the body: %q", r.Reason)
		}
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/404", v1.URISchemeHTTP), target), Failure, "statuscode: 404")
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/slow", v1.URISchemeHTTP), target), Failure, "deadline exceeded")
		if d := time.Since(start); d < time.Second || d > 2500*time.Millisecond {
			t.Fatalf("timed out after %v, want about timeoutSeconds=1", d)
		}
	})
	t.Run("refused", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(refusedPort(t))), "/ok", v1.URISchemeHTTP), target), Failure, "connection refused")
	})
	t.Run("bad port name", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromString("nope"), "/ok", v1.URISchemeHTTP), target), Unknown, `port not found: "nope"`)
	})
	t.Run("port out of range", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(70000), "/ok", v1.URISchemeHTTP), target), Unknown, "invalid port number: 70000")
	})
	t.Run("body read is bounded", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/big", v1.URISchemeHTTP), target), Success, "")
		select {
		case n := <-bigWritten:
			if n >= 64<<20 {
				t.Fatalf("the whole %d-byte body was read", n)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server is still writing the body: the probe did not hang up")
		}
	})
	t.Run("redirect same host followed", func(t *testing.T) {
		before := hits.Load()
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/redirect-ok", v1.URISchemeHTTP), target), Success, "")
		if hits.Load() != before+1 {
			t.Fatal("the redirect to /ok on the same host was not followed")
		}
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/redirect-fail", v1.URISchemeHTTP), target), Failure, "statuscode: 500")
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/loop", v1.URISchemeHTTP), target), Failure, "stopped after 10 redirects")
	})
	t.Run("redirect other host not followed", func(t *testing.T) {
		r := pr.Run(ctx, httpProbe(intstr.FromInt32(int32(port)), "/redirect-away", v1.URISchemeHTTP), target)
		expect(t, r, Success, "")
		if !strings.Contains(r.Warning, "Probe terminated redirects") {
			t.Fatalf("warning %q", r.Warning)
		}
		if n := otherHits.Load(); n != 0 {
			t.Fatalf("the other host got %d requests", n)
		}
	})
	t.Run("query in path", func(t *testing.T) {
		if u := probeURL("HTTP", "10.0.0.1", 80, "/ok?x=1"); u.String() != "http://10.0.0.1:80/ok?x=1" {
			t.Fatalf("url %s", u)
		}
		if u := probeURL("HTTPS", "fd00::1", 443, "healthz"); u.String() != "https://[fd00::1]:443/healthz" {
			t.Fatalf("url %s", u)
		}
	})
	t.Run("no pod IP", func(t *testing.T) {
		expect(t, pr.Run(ctx, httpProbe(intstr.FromInt32(80), "/", v1.URISchemeHTTP), Target{}), Unknown, "no IP")
	})
}

// fullListener is a loopback TCP socket listening with backlog 0 whose queue the test fills, so that
// further connects get no answer (the kernel drops their SYNs) and time out.
func fullListener(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	for i := 0; i < 256; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err != nil {
			return port // the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("256 connects to a listener with backlog 0 that never accepts all succeeded")
	return 0
}

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
			c.Close()
		}
	}()
	host, port := hostPort(t, l.Addr().String())
	pr := New(nil)
	ctx := context.Background()
	target := Target{PodIP: host, Container: &v1.Container{Ports: []v1.ContainerPort{{Name: "svc", ContainerPort: int32(port)}}}}
	tcp := func(p intstr.IntOrString) *v1.Probe {
		return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: p}}}
	}
	expect(t, pr.Run(ctx, tcp(intstr.FromInt32(int32(port))), target), Success, "")
	expect(t, pr.Run(ctx, tcp(intstr.FromString("svc")), target), Success, "")
	expect(t, pr.Run(ctx, tcp(intstr.FromString("other")), target), Unknown, "port not found")
	expect(t, pr.Run(ctx, tcp(intstr.FromInt32(int32(refusedPort(t)))), target), Failure, "connection refused")

	full := fullListener(t)
	start := time.Now()
	r := pr.Run(ctx, tcp(intstr.FromInt32(int32(full))), target)
	expect(t, r, Failure, "")
	if d := time.Since(start); d < 900*time.Millisecond || d > 2500*time.Millisecond {
		t.Fatalf("connect to a full backlog ended after %v (%v), want a timeout at about 1s", d, r)
	}
}

func TestGRPC(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("ready", healthpb.HealthCheckResponse_NOT_SERVING)
	var gotUA atomic.Value
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			gotUA.Store(strings.Join(md.Get("user-agent"), ","))
		}
		if r, ok := req.(*healthpb.HealthCheckRequest); ok && r.Service == "slow" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, hs)
	host, port := serveGRPC(t, gs)
	bare := grpc.NewServer() // a gRPC server without the health service
	_, barePort := serveGRPC(t, bare)

	pr := New(nil)
	ctx := context.Background()
	target := Target{PodIP: host}
	probe := func(port int, service string) *v1.Probe {
		p := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port)}}}
		if service != "" {
			p.GRPC.Service = &service
		}
		return p
	}
	expect(t, pr.Run(ctx, probe(port, ""), target), Success, "")
	if ua, _ := gotUA.Load().(string); !strings.HasPrefix(ua, UserAgent()+" ") {
		t.Fatalf("user-agent %q, want it to start with %q", ua, UserAgent())
	}
	expect(t, pr.Run(ctx, probe(port, "ready"), target), Failure, `service unhealthy (responded with "NOT_SERVING")`)
	hs.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
	expect(t, pr.Run(ctx, probe(port, "ready"), target), Success, "")
	expect(t, pr.Run(ctx, probe(port, "unknown-service"), target), Failure, "NotFound")
	expect(t, pr.Run(ctx, probe(barePort, ""), target), Failure, "does not implement the grpc health protocol")
	expect(t, pr.Run(ctx, probe(refusedPort(t), ""), target), Failure, "failed to connect service")
	start := time.Now()
	expect(t, pr.Run(ctx, probe(port, "slow"), target), Failure, "timeout: health rpc did not complete within 1s")
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Fatalf("timeout took %v", d)
	}
	expect(t, pr.Run(ctx, probe(0, ""), target), Unknown, "invalid port number")
}

func serveGRPC(t *testing.T, gs *grpc.Server) (string, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	return hostPort(t, l.Addr().String())
}

// fakeExec answers ExecSync from a table keyed by the command's first word and records the calls.
type fakeExec struct {
	calls []string
}

func (f *fakeExec) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s %v %v", id, cmd, timeout))
	switch cmd[0] {
	case "true":
		return nil, nil, 0, nil
	case "false":
		return []byte("out\n"), []byte("err\n"), 3, nil
	case "silent":
		return nil, nil, 7, nil
	case "sleep":
		return nil, nil, -1, fmt.Errorf("rpc: %w", ErrTimeout)
	}
	return nil, nil, -1, errors.New("container not running")
}

func TestExec(t *testing.T) {
	f := &fakeExec{}
	pr := New(f)
	ctx := context.Background()
	exec := func(timeout int32, cmd ...string) *v1.Probe {
		return &v1.Probe{TimeoutSeconds: timeout, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
	}
	target := Target{ContainerID: "containerd://abc"}
	expect(t, pr.Run(ctx, exec(2, "true"), target), Success, "")
	if want := "abc [true] 2s"; f.calls[0] != want {
		t.Fatalf("ExecSync call %q, want %q (prefix stripped, timeoutSeconds passed)", f.calls[0], want)
	}
	expect(t, pr.Run(ctx, exec(0, "false"), target), Failure, "out\nerr")
	if !strings.HasSuffix(f.calls[1], " 1s") {
		t.Fatalf("default timeout not 1s: %q", f.calls[1])
	}
	expect(t, pr.Run(ctx, exec(1, "silent"), target), Failure, `command "silent" exited with code 7`)
	expect(t, pr.Run(ctx, exec(1, "sleep", "10"), target), Failure, `command "sleep 10" timed out`)
	expect(t, pr.Run(ctx, exec(1, "other"), target), Unknown, "container not running")
	expect(t, pr.Run(ctx, exec(1, "true"), Target{}), Unknown, "no container ID")
	expect(t, New(nil).Run(ctx, exec(1, "true"), target), Unknown, "not supported")
}

func TestBadSpecs(t *testing.T) {
	pr := New(nil)
	ctx := context.Background()
	expect(t, pr.Run(ctx, &v1.Probe{}, Target{PodIP: "127.0.0.1"}), Unknown, "missing probe handler")
	two := &v1.Probe{ProbeHandler: v1.ProbeHandler{
		TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}, GRPC: &v1.GRPCAction{Port: 80}}}
	expect(t, pr.Run(ctx, two, Target{PodIP: "127.0.0.1"}), Unknown, "2 handlers")
	expect(t, pr.Run(ctx, nil, Target{}), Unknown, "no probe")
}
