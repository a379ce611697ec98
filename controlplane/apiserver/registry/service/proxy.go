package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/proxyhandler"
)

// NewProxyREST returns services/proxy over services, their EndpointSlices and pods:
// /api/v1/namespaces/NS/services/ID/proxy/PATH is proxied to PATH on one ready endpoint of the service,
// picked at random from its EndpointSlices and dialled through transport, as kube-apiserver's. ID is
// "name", "name:port" or "scheme:name:port"; port is a service port's name or number (a number names the
// service port with that port), and the endpoint's port is that service port's in the slice (the
// targetPort the EndpointSlice controller resolved, named container ports included). Only endpoints that
// are pods holding the endpoint's address are dialled. Errors, as kube-apiserver's: 400 "invalid service
// request" for a malformed ID, the service's Get error (404) when a port number is given (the service is
// not read otherwise: a missing service has no endpoints), 503 "no service port N found for service" and
// 503 "no endpoints available for service".
func NewProxyREST(services rest.Getter, slices rest.Lister, pods rest.Getter, transport http.RoundTripper) *proxyhandler.REST {
	l := serviceLocator{services: services, slices: slices, pods: pods, transport: transport}
	return &proxyhandler.REST{
		NewOptions: func() runtime.Object { return &corev1.ServiceProxyOptions{} },
		Path: func(o runtime.Object) (string, bool) {
			p, ok := o.(*corev1.ServiceProxyOptions)
			if !ok {
				return "", false
			}
			return p.Path, true
		},
		Locate: l.location,
	}
}

type serviceLocator struct {
	services, pods rest.Getter
	slices         rest.Lister
	transport      http.RoundTripper
}

// location is kube-apiserver's service ResourceLocation: scheme://endpointIP:port.
func (r serviceLocator) location(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, err := proxyhandler.SplitID("service", id)
	if err != nil {
		return nil, nil, err
	}
	family := corev1.IPFamilyUnknown
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		obj, err := r.services.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		svc := obj.(*corev1.Service)
		if len(svc.Spec.IPFamilies) > 0 {
			family = svc.Spec.IPFamilies[0]
		}
		found := false
		for _, p := range svc.Spec.Ports {
			if int64(p.Port) == n {
				port, found = p.Name, true
				break
			}
		}
		if !found {
			return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, name))
		}
	}
	ns := genericapirequest.NamespaceValue(ctx)
	list, err := r.slices.List(ctx, &metainternalversion.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})})
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	var slices []*discoveryv1.EndpointSlice
	for i := range list.(*discoveryv1.EndpointSliceList).Items {
		slices = append(slices, &list.(*discoveryv1.EndpointSliceList).Items[i])
	}
	if len(slices) == 0 {
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	hostPort, err := apiproxy.RandomEndpoint(name, slices, port, family, func(ep *discoveryv1.Endpoint) bool {
		if err := r.podHolds(ctx, ns, ep); err != nil {
			slog.Debug("service proxy: endpoint skipped", "service", ns+"/"+name, "endpoint", ep.Addresses, "err", err)
			return false
		}
		return true
	})
	if err != nil {
		return nil, nil, err
	}
	return &url.URL{Scheme: scheme, Host: hostPort}, r.transport, nil
}

// podHolds checks that the endpoint is a pod of namespace ns that has the endpoint's address (an
// EndpointSlice written by hand cannot send the API server to an arbitrary address).
func (r serviceLocator) podHolds(ctx context.Context, ns string, ep *discoveryv1.Endpoint) error {
	if ep.TargetRef == nil || ep.TargetRef.Namespace != ns || len(ep.Addresses) == 0 {
		return fmt.Errorf("endpoint is not a pod of namespace %s", ns)
	}
	obj, err := r.pods.Get(ctx, ep.TargetRef.Name, &metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, ip := range obj.(*corev1.Pod).Status.PodIPs {
		if ip.IP == ep.Addresses[0] {
			return nil
		}
	}
	return fmt.Errorf("pod %s/%s does not hold address %s", ns, ep.TargetRef.Name, ep.Addresses[0])
}
