package pod

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// KubeletConnection finds a node's kubelet: its base URL (https://<InternalIP>:<kubelet port>) and the
// transport carrying the API server's kubelet client certificate.
type KubeletConnection interface {
	KubeletLocation(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error)
}

// kubeletURL resolves pod name to its node's kubelet URL with path /<what>/<namespace>/<pod>/<container>.
func kubeletURL(ctx context.Context, s *store.REST, k KubeletConnection, name, container, what string) (*url.URL, http.RoundTripper, error) {
	obj, err := s.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	p := obj.(*corev1.Pod)
	if p.Spec.NodeName == "" {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	if container == "" {
		if len(p.Spec.Containers) != 1 {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", name, containerNames(p)))
		}
		container = p.Spec.Containers[0].Name
	} else if !hasContainer(p, container) {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, name))
	}
	base, rt, err := k.KubeletLocation(ctx, p.Spec.NodeName)
	if err != nil {
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("kubelet of node %s: %v", p.Spec.NodeName, err))
	}
	u := *base
	u.Path = fmt.Sprintf("/%s/%s/%s/%s", what, p.Namespace, p.Name, container)
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
	return &genericrest.LocationStreamer{
		Location:        u,
		Transport:       rt,
		ContentType:     "text/plain",
		Flush:           o.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
		RedirectChecker: genericrest.PreventRedirects,
	}, nil
}

// ExecREST is pods/exec: an upgraded (SPDY or WebSocket) connection proxied to the kubelet's /exec.
type ExecREST struct {
	store    *store.REST
	kubelets KubeletConnection
}

var _ rest.Connecter = &ExecREST{}

// New returns an empty Pod.
func (r *ExecREST) New() runtime.Object { return &corev1.Pod{} }

// Destroy is a no-op.
func (r *ExecREST) Destroy() {}

// NewConnectOptions returns PodExecOptions.
func (r *ExecREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodExecOptions{}, false, ""
}

// ConnectMethods are GET (WebSocket) and POST (SPDY), as kube-apiserver.
func (r *ExecREST) ConnectMethods() []string { return []string{"GET", "POST"} }

// Connect proxies the upgrade to the kubelet's /exec/<ns>/<pod>/<container>?command=...
func (r *ExecREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.PodExecOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	if len(o.Command) == 0 {
		return nil, apierrors.NewBadRequest("you must specify at least 1 command")
	}
	u, rt, err := kubeletURL(ctx, r.store, r.kubelets, name, o.Container, "exec")
	if err != nil {
		return nil, err
	}
	q := url.Values{"command": o.Command}
	for k, v := range map[string]bool{"stdin": o.Stdin, "stdout": o.Stdout, "stderr": o.Stderr, "tty": o.TTY} {
		if v {
			q.Set(k, "true")
		}
	}
	u.RawQuery = q.Encode()
	return proxy.NewUpgradeAwareHandler(u, rt, false, true, proxy.NewErrorResponder(responder)), nil
}
