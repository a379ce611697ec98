package pod

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// KubeletConnection finds a node's kubelet: its base URL (https://<InternalIP>:<kubelet port>) and the
// transport carrying the API server's kubelet client certificate.
type KubeletConnection interface {
	KubeletLocation(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error)
}

// kubeletURL resolves pod name to its node's kubelet URL with path /<what>/<namespace>/<pod>/<container>;
// an empty container is the pod's only one. Errors (400): a container the pod does not have, none named
// in a pod of several, a pod with no node; the pod's Get error; 503 when the node's kubelet has no
// address.
func kubeletURL(ctx context.Context, s *store.REST, k KubeletConnection, name, container, what string) (*url.URL, http.RoundTripper, error) {
	p, err := getPod(ctx, s, name)
	if err != nil {
		return nil, nil, err
	}
	if container == "" {
		if len(p.Spec.Containers) != 1 {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", name, containerNames(p)))
		}
		container = p.Spec.Containers[0].Name
	} else if !hasContainer(p, container) {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, name))
	}
	return nodeURL(ctx, k, p, fmt.Sprintf("/%s/%s/%s/%s", what, p.Namespace, p.Name, container))
}

// kubeletPodURL resolves pod name to its node's kubelet URL with path /<what>/<namespace>/<pod>.
func kubeletPodURL(ctx context.Context, s *store.REST, k KubeletConnection, name, what string) (*url.URL, http.RoundTripper, error) {
	p, err := getPod(ctx, s, name)
	if err != nil {
		return nil, nil, err
	}
	return nodeURL(ctx, k, p, fmt.Sprintf("/%s/%s/%s", what, p.Namespace, p.Name))
}

func getPod(ctx context.Context, s *store.REST, name string) (*corev1.Pod, error) {
	obj, err := s.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p := obj.(*corev1.Pod)
	if p.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	return p, nil
}

// nodeURL is path on the kubelet of the pod's node.
func nodeURL(ctx context.Context, k KubeletConnection, p *corev1.Pod, path string) (*url.URL, http.RoundTripper, error) {
	base, rt, err := k.KubeletLocation(ctx, p.Spec.NodeName)
	if err != nil {
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("kubelet of node %s: %v", p.Spec.NodeName, err))
	}
	u := *base
	u.Path = path
	return &u, rt, nil
}

func containerNames(p *corev1.Pod) []string {
	var n []string
	for _, c := range p.Spec.Containers {
		n = append(n, c.Name)
	}
	return n
}

func hasContainer(p *corev1.Pod, name string) bool {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// LogREST is pods/log: a stream from the kubelet's /containerLogs endpoint.
type LogREST struct {
	store    *store.REST
	kubelets KubeletConnection
}

var _ rest.GetterWithOptions = &LogREST{}

// New returns an empty Pod (the subresource has no object of its own).
func (r *LogREST) New() runtime.Object { return &corev1.Pod{} }

// Destroy is a no-op.
func (r *LogREST) Destroy() {}

// ProducesMIMETypes lists text/plain.
func (r *LogREST) ProducesMIMETypes(string) []string { return []string{"text/plain"} }

// ProducesObject is a string stream.
func (r *LogREST) ProducesObject(string) any { return "" }

// NewGetOptions returns PodLogOptions.
func (r *LogREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

// Get streams the container's log from its kubelet (GET /containerLogs/<ns>/<pod>/<container>).
func (r *LogREST) Get(ctx context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	o, ok := opts.(*corev1.PodLogOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	if errs := validation.PodLogOptions(o); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, name, errs)
	}
	u, rt, err := kubeletURL(ctx, r.store, r.kubelets, name, o.Container, "containerLogs")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.Previous {
		q.Set("previous", "true")
	}
	if o.Timestamps {
		q.Set("timestamps", "true")
	}
	if o.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*o.SinceSeconds, 10))
	}
	if o.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*o.TailLines, 10))
	}
	if o.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*o.LimitBytes, 10))
	}
	u.RawQuery = q.Encode()
	return &logStreamer{&genericrest.LocationStreamer{
		Location:        u,
		Transport:       rt,
		ContentType:     "text/plain",
		Flush:           o.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
		RedirectChecker: genericrest.PreventRedirects,
	}}, nil
}

// logStreamer is the kubelet's log answer as a stream (k8s.io/apiserver's LocationStreamer) whose reads
// never return bytes together with io.EOF: the WebSocket form of pods/log (wsstream's messageCopy, used
// by the API server's StreamObject) drops the bytes of such a read, so a kubelet answer with a
// Content-Length would reach a WebSocket client empty. Plain HTTP clients see the same bytes either way.
type logStreamer struct{ *genericrest.LocationStreamer }

// InputStream opens the kubelet's answer (LocationStreamer.InputStream) and splits a final read.
func (l *logStreamer) InputStream(ctx context.Context, apiVersion, acceptHeader string) (io.ReadCloser, bool, string, error) {
	rc, flush, contentType, err := l.LocationStreamer.InputStream(ctx, apiVersion, acceptHeader)
	if rc == nil || err != nil {
		return rc, flush, contentType, err
	}
	return &eofAfterData{ReadCloser: rc}, flush, contentType, nil
}

// eofAfterData returns a read's bytes first and its io.EOF on the next read.
type eofAfterData struct {
	io.ReadCloser
	eof bool
}

func (e *eofAfterData) Read(p []byte) (int, error) {
	if e.eof {
		return 0, io.EOF
	}
	n, err := e.ReadCloser.Read(p)
	if err == io.EOF && n > 0 {
		e.eof = true
		return n, nil
	}
	return n, err
}
