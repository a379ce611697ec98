// Package proxyhandler is what the pods/proxy, services/proxy and nodes/proxy subresources share, as
// kube-apiserver's: the methods they proxy, the check that a target address may be dialled, and the
// upgrade-aware handler that forwards a request (or an Upgrade: SPDY/WebSocket connection) to the
// resolved location.
package proxyhandler

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Methods are the HTTP methods kube-apiserver proxies (its proxyMethods).
var Methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// REST is a proxy subresource (rest.Connecter): the request's subpath fills its options' Path, Locate
// resolves the request's ID, and the request is forwarded there (handler).
type REST struct {
	// NewOptions returns an empty options object of the subresource (PodProxyOptions, ServiceProxyOptions,
	// NodeProxyOptions).
	NewOptions func() runtime.Object
	// Path reads the options' Path; false for an object of another kind.
	Path func(opts runtime.Object) (string, bool)
	// Locate resolves ID ("name", "name:port" or "scheme:name:port") to the target's scheme and host and
	// the transport to dial it with, or returns the API error to answer.
	Locate func(ctx context.Context, id string) (*url.URL, http.RoundTripper, error)
}

var _ rest.Connecter = &REST{}

// New returns an empty options object.
func (r *REST) New() runtime.Object { return r.NewOptions() }

// Destroy is a no-op.
func (r *REST) Destroy() {}

// ConnectMethods are the methods kube-apiserver proxies.
func (r *REST) ConnectMethods() []string { return Methods }

// NewConnectOptions returns the options object; the request's subpath becomes its Path.
func (r *REST) NewConnectOptions() (runtime.Object, bool, string) {
	return r.NewOptions(), true, "path"
}

// Connect resolves id and returns the handler forwarding the request there.
func (r *REST) Connect(ctx context.Context, id string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	path, ok := r.Path(opts)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %#v", opts))
	}
	loc, rt, err := r.Locate(ctx, id)
	if err != nil {
		return nil, err
	}
	return handler(loc, rt, path, responder), nil
}

// handler forwards a request to location with path joined to location's path (a trailing slash kept),
// the request's query, X-Forwarded-* headers and HTML links rewritten under the proxy prefix (the
// wrapped transport), and upgrades passed through; a GET of the bare proxy root (no path, no trailing
// slash) is redirected to the root with a slash, as kube-apiserver's newThrottledUpgradeAwareProxyHandler.
// Errors dialling the target are answered through responder (503 with the dial error).
func handler(location *url.URL, rt http.RoundTripper, path string, responder rest.Responder) http.Handler {
	loc := *location
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, path)
	return proxy.NewUpgradeAwareHandler(&loc, rt, true, false, proxy.NewErrorResponder(responder))
}

// CheckIP refuses an address that is not a global unicast IP (loopback, link-local, multicast,
// unspecified or not an IP at all) with kube-apiserver's 400 "address not allowed": the API server
// must not be turned into a way to reach its own host's loopback services.
func CheckIP(ip string) error {
	if p := net.ParseIP(ip); p == nil || !p.IsGlobalUnicast() {
		return apierrors.NewBadRequest("address not allowed")
	}
	return nil
}

// NewTransport returns the transport the API server dials pods, service endpoints and a node's
// non-kubelet ports with, as kube-apiserver's proxy transport: direct dials (no environment proxy: the
// API server runs where pod IPs are routed), TLS without verification for the https: forms (a pod's
// serving certificate names nothing the API server can check) and no client certificate.
func NewTransport() *http.Transport {
	return utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               func(*http.Request) (*url.URL, error) { return nil, nil },
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		// #nosec G402 -- as kube-apiserver: a pod's or service's https port is not verifiable.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
	})
}

// SplitID splits a proxy request's name "name", "name:port" or "scheme:name:port" (scheme http or
// https), or returns kube-apiserver's 400 "invalid <kind> request %q".
func SplitID(kind, id string) (scheme, name, port string, err error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return "", "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid %s request %q", kind, id))
	}
	return scheme, name, port, nil
}
