package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"

	"github.com/nodekit/nodekit/runtime/cri"
)

// CRI labels the kubelet puts on sandboxes and containers (upstream pkg/kubelet/types/labels.go).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// httpError is an error with the HTTP status it answers with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func fail(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) {
		http.Error(w, he.msg, he.code)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// lookupPod finds namespace/name among the kubelet's pods; uid, when not empty, must match.
func (s *Server) lookupPod(namespace, name, uid string) (*v1.Pod, error) {
	pod, ok := s.cfg.Pods.GetPodByName(namespace, name)
	if !ok || (uid != "" && string(pod.UID) != uid) {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("pod %s/%s not found on this node", namespace, name)}
	}
	return pod, nil
}

// findContainer returns the CRI ID of the pod's container instance: the newest one, or the one before
// it when previous is set (the instance kubectl logs --previous shows). Containers are matched by their
// sandbox (the pod UID label is on sandboxes) and the container name label.
func (s *Server) findContainer(ctx context.Context, pod *v1.Pod, container string, previous bool) (string, error) {
	sbs, err := s.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodUID: string(pod.UID)},
	}})
	if err != nil {
		return "", fmt.Errorf("list sandboxes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	inPod := map[string]bool{}
	for _, sb := range sbs.GetItems() {
		inPod[sb.GetId()] = true
	}
	resp, err := s.cfg.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{labelContainerName: container},
	}})
	if err != nil {
		return "", fmt.Errorf("list containers of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var cs []*runtimeapi.Container
	for _, c := range resp.GetContainers() {
		if inPod[c.GetPodSandboxId()] {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].GetCreatedAt() > cs[j].GetCreatedAt() })
	idx := 0
	if previous {
		idx = 1
	}
	if len(cs) <= idx {
		what := "container"
		if previous {
			what = "previous terminated container"
		}
		return "", &httpError{http.StatusNotFound, fmt.Sprintf("%s %q in pod %s/%s not found", what, container, pod.Namespace, pod.Name)}
	}
	return cs[idx].GetId(), nil
}

// containerLogs serves /containerLogs/{namespace}/{pod}/{container} with upstream's query parameters
// (v1.PodLogOptions: follow, previous, timestamps, tailLines, limitBytes, sinceSeconds, sinceTime), by
// reading the CRI log file of the container (CRI "Container logs" format) with k8s.io/cri-client's
// parser; follow streams until the container stops or the client goes away. The pods ProcessLogs
// names (component processes, kubelet/processpods) are served from their component's log file instead
// (processLogs).
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, ctrName := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, previous, err := parseLogOptions(r)
	if err != nil {
		fail(w, &httpError{http.StatusBadRequest, err.Error()})
		return
	}
	if s.cfg.ProcessLogs != nil {
		if path, ok := s.cfg.ProcessLogs(ns, name, ctrName); ok {
			s.processLogs(w, r, path, opts, previous)
			return
		}
	}
	pod, err := s.lookupPod(ns, name, "")
	if err != nil {
		fail(w, err)
		return
	}
	id, err := s.findContainer(r.Context(), pod, ctrName, previous)
	if err != nil {
		fail(w, err)
		return
	}
	st, err := s.cfg.Runtime.ContainerStatus(r.Context(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		fail(w, fmt.Errorf("container status %s: %w", id, err))
		return
	}
	path := st.GetStatus().GetLogPath()
	if path == "" {
		fail(w, &httpError{http.StatusNotFound, fmt.Sprintf("container %q in pod %s/%s has no log file", ctrName, ns, name)})
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fw := newFlushWriter(w, opts.Follow)
	if err := cri.ReadLogs(r.Context(), path, id, opts, s.cfg.Runtime, fw, fw); err != nil && r.Context().Err() == nil {
		s.log.Warn("container logs", "pod", ns+"/"+name, "container", ctrName, "err", err)
		if !fw.wrote {
			fail(w, err)
		}
	}
}

// parseLogOptions reads v1.PodLogOptions' query parameters. Errors name the parameter.
func parseLogOptions(r *http.Request) (*logs.LogOptions, bool, error) {
	q := r.URL.Query()
	opts := &logs.LogOptions{}
	var previous bool
	boolParam := func(name string, dst *bool) error {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", name, v)
			}
			*dst = b
		}
		return nil
	}
	intParam := func(name string) (*int64, error) {
		v := q.Get(name)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %q is not a non-negative integer", name, v)
		}
		return &n, nil
	}
	for name, dst := range map[string]*bool{"follow": &opts.Follow, "timestamps": &opts.Timestamp, "previous": &previous} {
		if err := boolParam(name, dst); err != nil {
			return nil, false, err
		}
	}
	var err error
	if opts.TailLines, err = intParam("tailLines"); err != nil {
		return nil, false, err
	}
	if opts.LimitBytes, err = intParam("limitBytes"); err != nil {
		return nil, false, err
	}
	since, err := intParam("sinceSeconds")
	if err != nil {
		return nil, false, err
	}
	if since != nil {
		if *since == 0 {
			return nil, false, errors.New("sinceSeconds: must be greater than 0")
		}
		// A sinceSeconds beyond time.Duration's range (292 years) means all the logs; multiplied out it
		// would overflow into a start in the future.
		if *since <= math.MaxInt64/int64(time.Second) {
			opts.Since = time.Now().Add(-time.Duration(*since) * time.Second)
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		if since != nil {
			return nil, false, errors.New("sinceTime: only one of sinceSeconds and sinceTime may be set")
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, false, fmt.Errorf("sinceTime: %q is not RFC3339", v)
		}
		opts.Since = t
	}
	return opts, previous, nil
}

// flushWriter flushes after every write while following, so lines reach the client as they come.
// newFlushWriter wraps a log answer. Every write is flushed, as upstream's flushwriter: the answer is
// chunked, never one body with a Content-Length, which kube-apiserver's WebSocket log stream (wsstream's
// messageCopy) would cut short when the body's last bytes arrive together with EOF. With follow the
// status line goes out at once, so a follower sees the stream open before the next line is logged.
func newFlushWriter(w http.ResponseWriter, follow bool) *flushWriter {
	fw := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		fw.f = f
		if follow {
			w.WriteHeader(http.StatusOK)
			f.Flush()
			fw.wrote = true
		}
	}
	return fw
}

type flushWriter struct {
	w     io.Writer
	f     http.Flusher
	wrote bool
}

func (fw *flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	fw.wrote = fw.wrote || n > 0
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}
