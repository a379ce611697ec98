package node

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/registry/rest"
)

// KubeletLocator finds a node's kubelet: its base URL and the transport carrying the API server's
// kubelet client certificate (the API server's kubelet connection).
type KubeletLocator interface {
	KubeletLocation(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error)
}

// ProxyREST is nodes/proxy: /api/v1/nodes/NAME/proxy/PATH is proxied to PATH on the node's kubelet API,
// as kube-apiserver does (`kubectl get --raw /api/v1/nodes/NAME/proxy/metrics`). Who may use it is
// the authorizer's decision on the nodes/proxy subresource.
type ProxyREST struct {
	kubelets KubeletLocator
}

// NewProxyREST returns nodes/proxy over kubelets.
func NewProxyREST(kubelets KubeletLocator) *ProxyREST { return &ProxyREST{kubelets: kubelets} }

var _ rest.Connecter = &ProxyREST{}

// New returns an empty Node.
func (r *ProxyREST) New() runtime.Object { return &corev1.Node{} }

// Destroy is a no-op.
func (r *ProxyREST) Destroy() {}

// NewConnectOptions returns NodeProxyOptions; the request's subpath becomes its Path.
func (r *ProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.NodeProxyOptions{}, true, "path"
}

// ConnectMethods are the methods kube-apiserver proxies to a node.
func (r *ProxyREST) ConnectMethods() []string {
	return []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
}

// Connect proxies the request to the kubelet of node name at opts' Path (with the request's query).
func (r *ProxyREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.NodeProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	base, rt, err := r.kubelets.KubeletLocation(ctx, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("kubelet of node %s: %v", name, err))
	}
	u := *base
	u.Path = "/" + strings.TrimPrefix(o.Path, "/")
	return proxy.NewUpgradeAwareHandler(&u, rt, true, false, proxy.NewErrorResponder(responder)), nil
}
