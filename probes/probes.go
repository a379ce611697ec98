// Package probes runs one container probe and says whether it passed: the four handlers of a Kubernetes
// v1.Probe (exec, httpGet, tcpSocket, grpc) with the semantics of the kubelet's prober
// (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-probes). It schedules
// nothing and keeps no state across calls: thresholds, periods and delays belong to the caller (the
// kubelet's probe manager). Exec probes reach the container runtime through the small Execer interface
// defined here, so the package never imports the kubelet or a runtime client. HTTPHook sends the httpGet
// action of a lifecycle hook with the same request and client.
package probes

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/version"
)

// Status is the outcome of one probe run.
type Status string

const (
	// Success: the handler's check passed (exit 0, HTTP 2xx/3xx, TCP connect, gRPC SERVING).
	Success Status = "Success"
	// Failure: the check ran and failed (non-zero exit, HTTP status >= 400, refused connection,
	// timeout, NOT_SERVING...). Failures count towards failureThreshold.
	Failure Status = "Failure"
	// Unknown: the probe could not be run at all (no handler, a port name the container does not
	// declare, the runtime failed the exec call). As upstream, callers do not count it towards either
	// threshold.
	Unknown Status = "Unknown"
)

// Result is one probe outcome.
type Result struct {
	Status Status
	// Reason explains a Failure or Unknown in the words of upstream's events, e.g. "HTTP probe failed
	// with statuscode: 500"; it is empty on Success.
	Reason string
	// Warning is set on a Success that upstream reports as a probe warning (an HTTP redirect to another
	// host is not followed and counts as success): "Probe terminated redirects, Response body: ...".
	Warning string
}

// String is "<Status>", "<Status>: <Reason>" or "<Status> (warning: <Warning>)".
func (r Result) String() string {
	switch {
	case r.Reason != "":
		return string(r.Status) + ": " + r.Reason
	case r.Warning != "":
		return string(r.Status) + " (warning: " + r.Warning + ")"
	}
	return string(r.Status)
}

func success() Result                   { return Result{Status: Success} }
func failure(f string, a ...any) Result { return Result{Status: Failure, Reason: fmt.Sprintf(f, a...)} }
func unknown(f string, a ...any) Result { return Result{Status: Unknown, Reason: fmt.Sprintf(f, a...)} }
func withWarning(w string) Result       { return Result{Status: Success, Warning: w} }

// defaultTimeout is timeoutSeconds as a duration, 1 s (the API default) when unset.
func defaultTimeout(seconds int32) time.Duration {
	if seconds <= 0 {
		return time.Second // the API default of timeoutSeconds
	}
	return time.Duration(seconds) * time.Second
}

// Execer runs a command in a running container and waits for it: CRI ExecSync
// (runtime.v1.RuntimeService/ExecSync). containerID is the CRI container ID without a "<runtime>://"
// prefix. The runtime kills the command when it outlives timeout; the returned error then wraps
// context.DeadlineExceeded. A command that ran to completion returns err == nil whatever its exit code.
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error)
}

// Target is what a probe runs against.
type Target struct {
	// PodIP is the pod's primary IP (status.podIP): the host of httpGet/tcpSocket handlers without an
	// explicit host, and of every grpc handler.
	PodIP string
	// ContainerID is the CRI ID of the container exec probes run in (a "<runtime>://" prefix is
	// stripped).
	ContainerID string
	// Container is the probed container's spec; named ports (httpGet/tcpSocket port: "http") resolve
	// against its ports.
	Container *v1.Container
}

// Prober runs probes; create it with New. It is safe for concurrent use and holds one HTTP transport
// (keep-alives off, as upstream, so no connection outlives its probe).
type Prober struct {
	exec      Execer
	userAgent string
	http      *http.Client
}

// New returns a Prober running exec probes through exec (nil: exec probes end Unknown).
func New(exec Execer) *Prober {
	return &Prober{exec: exec, userAgent: UserAgent(), http: newHTTPClient()}
}

// UserAgent is the User-Agent of HTTP and gRPC probes, "kube-probe/<major>.<minor>" of the Kubernetes
// version nodekit follows (e.g. kube-probe/1.37), as upstream sends.
func UserAgent() string { return userAgent("probe") }

// userAgent is "kube-<fragment>/<major>.<minor>" (upstream's probe and lifecycle agents).
func userAgent(fragment string) string {
	v := strings.TrimPrefix(version.KubernetesVersion, "v")
	if i := strings.IndexByte(v, '.'); i >= 0 {
		if j := strings.IndexByte(v[i+1:], '.'); j >= 0 {
			v = v[:i+1+j]
		}
	}
	return "kube-" + fragment + "/" + v
}

// Run runs probe p once against t, bounded by p.TimeoutSeconds (default 1 s) and ctx. A probe with no
// handler or more than one is Unknown (the API server rejects such specs; this guards direct callers).
func (pr *Prober) Run(ctx context.Context, p *v1.Probe, t Target) Result {
	if p == nil {
		return unknown("no probe")
	}
	timeout := defaultTimeout(p.TimeoutSeconds)
	h := p.ProbeHandler
	n := 0
	for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return unknown("missing probe handler")
	case n > 1:
		return unknown("probe has %d handlers, want exactly one", n)
	}
	switch {
	case h.Exec != nil:
		return pr.runExec(ctx, h.Exec.Command, t.ContainerID, timeout)
	case h.HTTPGet != nil:
		port, err := ResolvePort(h.HTTPGet.Port, t.Container)
		if err != nil {
			return unknown("%v", err)
		}
		return pr.runHTTP(ctx, h.HTTPGet, hostOr(h.HTTPGet.Host, t.PodIP), port, timeout)
	case h.TCPSocket != nil:
		port, err := ResolvePort(h.TCPSocket.Port, t.Container)
		if err != nil {
			return unknown("%v", err)
		}
		return runTCP(ctx, hostOr(h.TCPSocket.Host, t.PodIP), port, timeout)
	default:
		svc := ""
		if h.GRPC.Service != nil {
			svc = *h.GRPC.Service
		}
		if h.GRPC.Port <= 0 || h.GRPC.Port > 65535 {
			return unknown("invalid port number: %d", h.GRPC.Port)
		}
		return pr.runGRPC(ctx, t.PodIP, int(h.GRPC.Port), svc, timeout)
	}
}

func hostOr(host, podIP string) string {
	if host != "" {
		return host
	}
	return podIP
}

// ResolvePort turns a probe port into a number: an integer as is, a name through the container's ports
// (v1.ContainerPort.Name). Errors: "port not found: <name>" for an undeclared name, "invalid port
// number: N" outside 1-65535.
func ResolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n := 0
	if port.Type == intstr.String {
		found := false
		if c != nil {
			for _, cp := range c.Ports {
				if cp.Name == port.StrVal {
					n, found = int(cp.ContainerPort), true
					break
				}
			}
		}
		if !found {
			return 0, fmt.Errorf("port not found: %q", port.StrVal)
		}
	} else {
		n = port.IntValue()
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", n)
	}
	return n, nil
}
