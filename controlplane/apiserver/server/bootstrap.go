package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
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
// the API server's port) with its endpoints, as kube-apiserver's bootstrap controller does, and
// kubeadm's kube-public/cluster-info ConfigMap (the server URL and the cluster CA, caPEM).
type bootstrap struct {
	core         map[string]rest.Storage
	kubernetesIP string
	advertise    string
	port         int
	caPEM        []byte
}

func (b *bootstrap) run(hc genericapiserver.PostStartHookContext) error {
	return wait.PollUntilContextTimeout(hc.Context, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
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
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: b.advertise}},
			Ports: []corev1.EndpointPort{{Name: "https", Port: int32(b.port), Protocol: corev1.ProtocolTCP}}}},
	}
	if err := b.upsertEndpoints(ctx, ep); err != nil {
		return err
	}
	return ensureClusterInfo(ctx, b.core["configmaps"], serverURL(b.advertise, b.port), b.caPEM)
}

// create stores obj (defaulted as a request body would be) unless it exists. Existence is checked first:
// a create of the existing `kubernetes` service would be refused for its taken ClusterIP, not as
// AlreadyExists.
func (b *bootstrap) create(ctx context.Context, resource, ns string, obj runtime.Object) error {
	scheme.Scheme.Default(obj)
	ctx = genericapirequest.WithNamespace(ctx, ns)
	_, err := b.core[resource].(rest.Getter).Get(ctx, nameOf(obj), &metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s %s/%s: %w", resource, ns, nameOf(obj), err)
	}
	c := b.core[resource].(rest.Creater)
	_, err = c.Create(ctx, obj, nil, &metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s/%s: %w", resource, ns, nameOf(obj), err)
	}
	return nil
}

// upsertEndpoints points the kubernetes endpoints at this server (its address or port may change).
func (b *bootstrap) upsertEndpoints(ctx context.Context, ep *corev1.Endpoints) error {
	ctx = genericapirequest.WithNamespace(ctx, ep.Namespace)
	scheme.Scheme.Default(ep)
	u := b.core["endpoints"].(rest.Updater)
	_, _, err := u.Update(ctx, ep.Name, rest.DefaultUpdatedObjectInfo(ep), nil, nil, false, &metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return b.create(ctx, "endpoints", ep.Namespace, ep)
	}
	return err
}

func nameOf(obj runtime.Object) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}
