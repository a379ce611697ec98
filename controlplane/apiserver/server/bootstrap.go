package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/nodekit/nodekit/controlplane/apiserver/scheme"
)

// SystemNamespaces are created at start: default, kube-system, kube-public, kube-node-lease.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap creates the system namespaces and the `kubernetes` service (first service IP, port 443 →
// the API server's port) with its Endpoints and EndpointSlice, as kube-apiserver's bootstrap controller
// and endpoint reconciler do, and kubeadm's kube-public/cluster-info ConfigMap (the server URL and the
// cluster CA, caPEM).
type bootstrap struct {
	core map[string]rest.Storage
	// slices is the discovery.k8s.io/v1 endpointslices storage.
	slices       rest.Storage
	kubernetesIP string
	advertise    string
	port         int
	caPEM        []byte
}

// run retries ensure every second until it succeeds or the server stops: /readyz reports the hook not
// ready meanwhile. It has no deadline, so a slow machine (an emulated VM, a loaded host) whose storage
// answers late gets a server that becomes ready late instead of one that exits and starts over.
func (b *bootstrap) run(hc genericapiserver.PostStartHookContext) error {
	return wait.PollUntilContextCancel(hc.Context, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := b.ensure(ctx); err != nil {
			slog.Warn("apiserver bootstrap: retrying", "err", err)
			return false, nil
		}
		return true, nil
	})
}

func (b *bootstrap) ensure(ctx context.Context) error {
	for _, ns := range SystemNamespaces {
		if err := b.create(ctx, "namespaces", "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{ClusterIP: b.kubernetesIP, Ports: []corev1.ServicePort{{Name: "https", Port: 443,
			Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(b.port))}}},
	}
	if err := b.create(ctx, "services", metav1.NamespaceDefault, svc); err != nil {
		return err
	}
	// skip-mirror: the Endpoints are not to be mirrored into a second slice; ours is written below.
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: b.advertise}},
			Ports: []corev1.EndpointPort{{Name: "https", Port: int32(b.port), Protocol: corev1.ProtocolTCP}}}},
	}
	if err := b.upsert(ctx, b.core["endpoints"], "endpoints", ep); err != nil {
		return err
	}
	slice, err := kubernetesSlice(b.advertise, b.port)
	if err != nil {
		return err
	}
	if err := b.upsert(ctx, b.slices, "endpointslices", slice); err != nil {
		return err
	}
	return ensureClusterInfo(ctx, b.core["configmaps"], serverURL(b.advertise, b.port), b.caPEM)
}

// create stores obj (defaulted as a request body would be) unless it exists. Existence is checked first:
// a create of the existing `kubernetes` service would be refused for its taken ClusterIP, not as
// AlreadyExists.
func (b *bootstrap) create(ctx context.Context, resource, ns string, obj runtime.Object) error {
	return createIn(ctx, b.core[resource], resource, ns, obj)
}

// createIn is create on the storage st of resource.
func createIn(ctx context.Context, st rest.Storage, resource, ns string, obj runtime.Object) error {
	scheme.Scheme.Default(obj)
	ctx = genericapirequest.WithNamespace(ctx, ns)
	_, err := st.(rest.Getter).Get(ctx, nameOf(obj), &metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s %s/%s: %w", resource, ns, nameOf(obj), err)
	}
	c := st.(rest.Creater)
	_, err = c.Create(ctx, obj, nil, &metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s/%s: %w", resource, ns, nameOf(obj), err)
	}
	return nil
}

// upsert replaces obj (Endpoints or EndpointSlice `kubernetes`) in the storage st of resource, or creates
// it, so it points at this server even when its address or port changed since the last start.
func (b *bootstrap) upsert(ctx context.Context, st rest.Storage, resource string, obj runtime.Object) error {
	ns := obj.(metav1.Object).GetNamespace()
	ctx = genericapirequest.WithNamespace(ctx, ns)
	scheme.Scheme.Default(obj)
	_, _, err := st.(rest.Updater).Update(ctx, nameOf(obj), rest.DefaultUpdatedObjectInfo(obj), nil, nil, false, &metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return createIn(ctx, st, resource, ns, obj)
	}
	if err != nil {
		return fmt.Errorf("update %s %s/%s: %w", resource, ns, nameOf(obj), err)
	}
	return nil
}

// kubernetesSlice is the EndpointSlice of the `kubernetes` Service, as kube-apiserver's endpoint reconciler
// writes it: labelled kubernetes.io/service-name=kubernetes and without the EndpointSlice controller's
// managed-by value (the controller only manages slices of Services with a selector, and only slices
// carrying its own managed-by), addressType from the advertised address's family, one ready endpoint at
// that address, port "https" = the secure port over TCP. An advertised address that is not an IP is an
// error.
func kubernetesSlice(advertise string, port int) (*discoveryv1.EndpointSlice, error) {
	addr, err := netip.ParseAddr(advertise)
	if err != nil {
		return nil, fmt.Errorf("kubernetes endpointslice: advertise address %q is not an IP: %w", advertise, err)
	}
	family := discoveryv1.AddressTypeIPv4
	if addr.Unmap().Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	ready, name, proto, p := true, "https", corev1.ProtocolTCP, int32(port)
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr.Unmap().String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &p, Protocol: &proto}},
	}, nil
}

func nameOf(obj runtime.Object) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}
