package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/proxyhandler"
)

// KubeletLocator finds a node's kubelet: its base URL and the transport carrying the API server's
// kubelet client certificate (the API server's kubelet connection).
type KubeletLocator interface {
	KubeletLocation(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error)
}

// NewProxyREST returns nodes/proxy over kubelets: /api/v1/nodes/ID/proxy/PATH is proxied as
// kube-apiserver does (`kubectl get --raw /api/v1/nodes/NAME/proxy/metrics`). ID is "name", "name:port"
// or "scheme:name:port": with no port or the kubelet's port, to PATH on the node's kubelet API over the
// kubelet connection (the API server's kubelet client certificate, the kubelet's serving certificate
// verified); with another port, to that port on the node's address through transport, only if the
// address is global unicast (never the API server host's loopback). Who may use it is the authorizer's
// decision on the nodes/proxy subresource. Errors: 400 "invalid node request" for a malformed ID, the
// node's Get error (404), 503 for a node with no address, 400 "address not allowed" for another port on
// an address that is not global unicast.
func NewProxyREST(kubelets KubeletLocator, transport http.RoundTripper) *proxyhandler.REST {
	return &proxyhandler.REST{
		NewOptions: func() runtime.Object { return &corev1.NodeProxyOptions{} },
		Path: func(o runtime.Object) (string, bool) {
			p, ok := o.(*corev1.NodeProxyOptions)
			if !ok {
				return "", false
			}
			return p.Path, true
		},
		Locate: func(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
			scheme, name, port, err := proxyhandler.SplitID("node", id)
			if err != nil {
				return nil, nil, err
			}
			base, rt, err := kubelets.KubeletLocation(ctx, name)
			if err != nil {
				if apierrors.IsNotFound(err) {
					return nil, nil, err
				}
				return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("kubelet of node %s: %v", name, err))
			}
			if port == "" || port == base.Port() {
				return base, rt, nil
			}
			if err := proxyhandler.CheckIP(base.Hostname()); err != nil {
				return nil, nil, err
			}
			return &url.URL{Scheme: scheme, Host: net.JoinHostPort(base.Hostname(), port)}, transport, nil
		},
	}
}
