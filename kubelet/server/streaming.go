package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamOptions are the exec/attach query parameters as upstream's API server sends them to the
// kubelet (v1.ExecStdinParam "input", ExecStdoutParam "output", ExecStderrParam "error", ExecTTYParam
// "tty", each "1"; "command" repeated for exec). The v1.PodExecOptions spellings (stdin, stdout, stderr,
// "true") are accepted too, for API servers and clients that pass those through unchanged.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
	command                    []string
}

func parseStreamOptions(r *http.Request, exec bool) (streamOptions, error) {
	q := r.URL.Query()
	flag := func(names ...string) bool {
		for _, n := range names {
			if v := q.Get(n); v == "1" || v == "true" {
				return true
			}
		}
		return false
	}
	o := streamOptions{
		stdin: flag(v1.ExecStdinParam, "stdin"), stdout: flag(v1.ExecStdoutParam, "stdout"), stderr: flag(v1.ExecStderrParam, "stderr"),
		tty: flag(v1.ExecTTYParam), command: q[v1.ExecCommandParam],
	}
	if o.tty && o.stderr {
		o.stderr = false // upstream: with a TTY, stderr is merged into stdout
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, fmt.Errorf("you must specify at least one of input, output or error")
	}
	if exec && len(o.command) == 0 {
		return o, fmt.Errorf("command: at least one is required")
	}
	return o, nil
}

// exec serves /exec/{namespace}/{pod}[/{uid}]/{container}: CRI Exec returns the runtime's streaming URL
// and the request (an upgrade to SPDY or WebSocket) is proxied to it, as upstream's kubelet does.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, true, func(id string, o streamOptions) (string, error) {
		resp, err := s.cfg.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: o.command,
			Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr})
		return resp.GetUrl(), err
	})
}

// attach serves /attach/{namespace}/{pod}[/{uid}]/{container} through CRI Attach.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, false, func(id string, o streamOptions) (string, error) {
		resp, err := s.cfg.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: id,
			Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr})
		return resp.GetUrl(), err
	})
}

// stream parses the stream options, resolves the container and proxies to the URL call returns.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, exec bool, call func(id string, o streamOptions) (string, error)) {
	o, err := parseStreamOptions(r, exec)
	if err != nil {
		fail(w, &httpError{http.StatusBadRequest, err.Error()})
		return
	}
	id, err := s.streamContainer(r)
	if err != nil {
		fail(w, err)
		return
	}
	u, err := call(id, o)
	if err != nil {
		fail(w, fmt.Errorf("CRI streaming request for container %s: %w", id, err))
		return
	}
	proxyStream(w, r, u)
}

// portForward serves /portForward/{namespace}/{pod}[/{uid}] through CRI PortForward on the pod's ready
// sandbox. Ports come from the "port" query parameters (WebSocket clients) or, for SPDY, from the stream
// headers the runtime's streaming server reads itself.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	pod, err := s.lookupPod(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"))
	if err != nil {
		fail(w, err)
		return
	}
	var ports []int32
	for _, p := range r.URL.Query()["port"] {
		for _, f := range strings.Split(p, ",") {
			n, err := strconv.ParseUint(f, 10, 16)
			if err != nil || n == 0 {
				fail(w, &httpError{http.StatusBadRequest, fmt.Sprintf("port: %q is not a port number", f)})
				return
			}
			ports = append(ports, int32(n))
		}
	}
	sb, err := s.cfg.Runtime.ListPodSandbox(r.Context(), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID)},
	}})
	if err != nil {
		fail(w, fmt.Errorf("list sandboxes of pod %s/%s: %w", pod.Namespace, pod.Name, err))
		return
	}
	if len(sb.GetItems()) == 0 {
		fail(w, &httpError{http.StatusNotFound, fmt.Sprintf("pod %s/%s has no ready sandbox", pod.Namespace, pod.Name)})
		return
	}
	resp, err := s.cfg.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sb.GetItems()[0].GetId(), Port: ports})
	if err != nil {
		fail(w, fmt.Errorf("CRI PortForward to pod %s/%s: %w", pod.Namespace, pod.Name, err))
		return
	}
	proxyStream(w, r, resp.GetUrl())
}

// streamContainer resolves the path's pod (and uid, if given) and container to the container's CRI ID.
func (s *Server) streamContainer(r *http.Request) (string, error) {
	pod, err := s.lookupPod(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"))
	if err != nil {
		return "", err
	}
	return s.findContainer(r.Context(), pod, r.PathValue("container"), false)
}

// proxyStream proxies the upgrade request to the runtime's streaming URL with apimachinery's
// upgrade-aware proxy (upstream's proxyStream).
func proxyStream(w http.ResponseWriter, r *http.Request, streamURL string) {
	u, err := url.Parse(streamURL)
	if err != nil {
		fail(w, fmt.Errorf("runtime returned a bad streaming URL %q: %w", streamURL, err))
		return
	}
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{})
	h.ServeHTTP(w, r)
}

type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
