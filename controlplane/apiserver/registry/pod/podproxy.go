package pod

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/proxyhandler"
)

// NewProxyREST returns pods/proxy over pods: /api/v1/namespaces/NS/pods/ID/proxy/PATH is proxied to
// PATH on the pod's IP, dialled directly through transport, as kube-apiserver's. ID is "name",
// "name:port" or "scheme:name:port" (scheme http or https); with no port, the first declared port of the
// pod's containers, else none (80 or 443 by the scheme). Errors: 400 "invalid pod request" for a
// malformed ID, the pod's Get error (404), 400 "address not allowed" for a pod with no global unicast
// IP (none yet, or host-network on a loopback node).
func NewProxyREST(pods rest.Getter, transport http.RoundTripper) *proxyhandler.REST {
	l := podLocator{pods: pods, transport: transport}
	return &proxyhandler.REST{
		NewOptions: func() runtime.Object { return &corev1.PodProxyOptions{} },
		Path: func(o runtime.Object) (string, bool) {
			p, ok := o.(*corev1.PodProxyOptions)
			if !ok {
				return "", false
			}
			return p.Path, true
		},
		Locate: l.location,
	}
}

type podLocator struct {
	pods      rest.Getter
	transport http.RoundTripper
}

// location is kube-apiserver's pod ResourceLocation: scheme://podIP[:port].
func (r podLocator) location(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, err := proxyhandler.SplitID("pod", id)
	if err != nil {
		return nil, nil, err
	}
	obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	p := obj.(*corev1.Pod)
	if port == "" {
		for _, c := range p.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	ip := ""
	if len(p.Status.PodIPs) > 0 {
		ip = p.Status.PodIPs[0].IP
	}
	if err := proxyhandler.CheckIP(ip); err != nil {
		return nil, nil, err
	}
	host := ip
	if port != "" {
		host = net.JoinHostPort(ip, port)
	} else if net.ParseIP(ip).To4() == nil {
		host = "[" + ip + "]"
	}
	return &url.URL{Scheme: scheme, Host: host}, r.transport, nil
}
