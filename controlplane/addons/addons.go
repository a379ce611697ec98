// Package addons holds the cluster add-ons the server installs, as k3s's packaged manifests: a fixed
// set of API objects per add-on, reconciled at every server start (each object created, or updated to
// the desired state when it exists), or removed when the add-on is disabled (`nodekit server --disable
// coredns`). The objects are built in Go from the real k8s.io/api types and reach the cluster through
// the API server like any client's.
//
// The add-ons: coredns, the cluster DNS (CoreDNS from the bundled image nodekit.local/coredns, its
// ServiceAccount, RBAC and Corefile, and the Service kube-system/kube-dns at the tenth address of the
// service range); local-storage, the default StorageClass local-path (`--disable local-storage`);
// metrics, the resource metrics API metrics.k8s.io, which the API server serves itself and which has no
// objects here (`--disable metrics` turns the API server's Options.DisableMetrics on).
package addons

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Names of the add-ons, for Options.Disabled (`--disable`).
const (
	// CoreDNS is the cluster DNS add-on.
	CoreDNS = "coredns"
	// LocalStorage is the default StorageClass local-path (nodekit's local-path provisioner).
	LocalStorage = "local-storage"
	// Metrics is the resource metrics API (metrics.k8s.io, `kubectl top`), served by the API server
	// from the kubelets' /stats/summary: it has no objects to reconcile.
	Metrics = "metrics"
)

// Names lists every add-on, in install order.
var Names = []string{CoreDNS, LocalStorage, Metrics}

// Labels put on every object an add-on owns: LabelAddon names the add-on, so that disabling it
// removes exactly its objects (and never an object someone else made under the same name).
const (
	LabelAddon     = "addons.nodekit.io/name"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "nodekit"
)

// DefaultClusterDomain is the cluster's DNS domain (the kubelet's clusterDomain).
const DefaultClusterDomain = "cluster.local"

// Options configure the add-ons.
type Options struct {
	// Disabled names add-ons (of Names) not to install; an installed one is removed.
	Disabled []string
	// ServiceCIDR is the ClusterIP range the kube-dns Service's address is taken from (DNSServiceIP).
	ServiceCIDR string
	// ClusterDomain is the DNS domain CoreDNS serves; default DefaultClusterDomain.
	ClusterDomain string
}

// Validate checks that every disabled name is a known add-on; the error names --disable.
func (o Options) Validate() error {
	for _, d := range o.Disabled {
		if !slices.Contains(Names, d) {
			return fmt.Errorf("--disable: unknown add-on %q (known: %s)", d, strings.Join(Names, ", "))
		}
	}
	return nil
}

// Enabled reports whether the add-on name is to be installed.
func (o Options) Enabled(name string) bool { return !slices.Contains(o.Disabled, name) }

// DNSServiceIP returns the cluster DNS address: the tenth address of serviceCIDR (10.96.0.10 for
// 10.96.0.0/12), as kubeadm and k3s choose it. The range must hold at least 11 addresses.
func DNSServiceIP(serviceCIDR string) (net.IP, error) {
	_, n, err := net.ParseCIDR(serviceCIDR)
	if err != nil {
		return nil, fmt.Errorf("service CIDR: %w", err)
	}
	ones, bits := n.Mask.Size()
	if bits-ones < 4 {
		return nil, fmt.Errorf("service CIDR %s is too small for the cluster DNS address (the tenth)", serviceCIDR)
	}
	ip := new(big.Int).SetBytes(n.IP)
	ip.Add(ip, big.NewInt(10))
	out := make(net.IP, len(n.IP))
	return ip.FillBytes(out), nil
}

// object is one API object of an add-on: how to bring the cluster to it and how to remove it.
type object struct {
	// kind and name (namespace/name for namespaced ones) name it in logs and errors.
	kind, name string
	// apply creates the object or updates it to the desired state; created reports which.
	apply func(ctx context.Context) (created bool, err error)
	// remove deletes the object if it exists and carries the add-on's label.
	remove func(ctx context.Context) error
	// rbac marks objects of rbac.authorization.k8s.io, skipped when the API server does not serve it.
	rbac bool
}

// Reconcile brings every add-on to o once: each enabled add-on's objects are applied in order, each
// disabled one's removed in reverse order. Errors name the add-on and the object; it goes on with the
// other objects and returns them all joined.
func Reconcile(ctx context.Context, client kubernetes.Interface, o Options, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	rbacServed, err := servesRBAC(client)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range Names {
		objs, err := objectsOf(name, client, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("add-on %s: %w", name, err))
			continue
		}
		if !o.Enabled(name) {
			for _, obj := range slices.Backward(objs) {
				if obj.rbac && !rbacServed {
					continue
				}
				if err := obj.remove(ctx); err != nil {
					errs = append(errs, fmt.Errorf("add-on %s: remove %s %s: %w", name, obj.kind, obj.name, err))
				}
			}
			log.Info("add-on disabled", "addon", name)
			continue
		}
		for _, obj := range objs {
			if obj.rbac && !rbacServed {
				log.Warn("the API server does not serve rbac.authorization.k8s.io: add-on object not created", "addon", name, "kind", obj.kind, "object", obj.name)
				continue
			}
			created, err := obj.apply(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("add-on %s: apply %s %s: %w", name, obj.kind, obj.name, err))
				continue
			}
			log.Debug("add-on object reconciled", "addon", name, "kind", obj.kind, "object", obj.name, "created", created)
		}
		if len(objs) > 0 { // metrics has none: the API server serves it
			log.Info("add-on reconciled", "addon", name)
		}
	}
	return errors.Join(errs...)
}

// Run calls Reconcile until it succeeds or ctx ends, waiting retry between attempts (the API server
// may still be starting, kube-system may not exist yet). It logs each failure.
func Run(ctx context.Context, client kubernetes.Interface, o Options, log *slog.Logger, retry time.Duration) {
	if log == nil {
		log = slog.Default()
	}
	for {
		err := Reconcile(ctx, client, o, log)
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Warn("add-ons not reconciled, retrying", "err", err, "retry", retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// servesRBAC reports whether the API server serves rbac.authorization.k8s.io/v1.
func servesRBAC(client kubernetes.Interface) (bool, error) {
	_, err := client.Discovery().ServerResourcesForGroupVersion("rbac.authorization.k8s.io/v1")
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("discovery of rbac.authorization.k8s.io/v1: %w", err)
	}
}

func objectsOf(name string, client kubernetes.Interface, o Options) ([]object, error) {
	switch name {
	case CoreDNS:
		return corednsObjects(client, o)
	case LocalStorage:
		return localStorageObjects(client), nil
	case Metrics:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown add-on %q", name)
}

// meta is the ObjectMeta of an add-on object: its name, namespace and the add-on's labels plus extra.
func meta(addon, namespace, name string, extra map[string]string) metav1.ObjectMeta {
	l := map[string]string{LabelAddon: addon, LabelManagedBy: ManagedBy}
	for k, v := range extra {
		l[k] = v
	}
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: l}
}

// mergeLabels returns have with want's labels set (other labels are kept).
func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range want {
		have[k] = v
	}
	return have
}

// ours reports whether labels mark an object of addon.
func ours(labels map[string]string, addon string) bool { return labels[LabelAddon] == addon }

// typed is what the typed clients of one kind offer reconcile and remove.
type typed[T any] struct {
	get    func(ctx context.Context, name string, o metav1.GetOptions) (T, error)
	create func(ctx context.Context, obj T, o metav1.CreateOptions) (T, error)
	update func(ctx context.Context, obj T, o metav1.UpdateOptions) (T, error)
	delete func(ctx context.Context, name string, o metav1.DeleteOptions) error
	labels func(T) map[string]string
}

// fieldManager names nodekit's add-on reconciler in managedFields.
const fieldManager = "nodekit-addons"

// reconcile creates want, or (when it exists) updates it with set(existing, want), which copies the
// desired state onto the stored object. When set returns false the object cannot be updated to want
// (an immutable field differs): it is deleted and created again.
func reconcile[T any](ctx context.Context, c typed[T], name string, want T, set func(have, want T) bool) (bool, error) {
	have, err := c.get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	if !set(have, want) {
		if err := c.delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		_, err = c.create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		return err == nil, err
	}
	_, err = c.update(ctx, have, metav1.UpdateOptions{FieldManager: fieldManager})
	return false, err
}

// remove deletes the object name if it exists and carries addon's label (background propagation, so
// the garbage collector removes what it owns, a Deployment's ReplicaSets and pods).
func remove[T any](ctx context.Context, c typed[T], name, addon string) error {
	have, err := c.get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ours(c.labels(have), addon) {
		return nil
	}
	bg := metav1.DeletePropagationBackground
	if err := c.delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
