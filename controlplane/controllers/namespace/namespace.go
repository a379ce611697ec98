// Package namespace is the namespace controller: when a Namespace is being deleted (deletionTimestamp
// set, phase Terminating) it deletes its pods first and, once none is left, every other object in it,
// kind by kind (the built-in kinds of package resources, workloads first, then every other namespaced
// resource that discovery lists with the list and delete verbs, such as custom resources, through the
// metadata client, as Kubernetes' namespace controller does), waits until nothing is left (graceful pod
// deletions and finalizers included), then removes the "kubernetes" finalizer from spec.finalizers through the namespaces/finalize
// subresource so the API server can remove the Namespace itself. Each pass reports on the namespace
// Kubernetes' deletion conditions (NamespaceDeletionContentFailure, NamespaceContentRemaining,
// NamespaceFinalizersRemaining, ...; see conditions.go).
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"

	"github.com/nodekit/nodekit/controlplane/controllers/resources"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// recheck is how soon a namespace whose contents are still going away is looked at again.
const recheck = 2 * time.Second

// Controller empties and finalizes terminating namespaces. Queue keys are namespace names.
type Controller struct {
	client kubernetes.Interface
	meta   metadata.Interface
	nsList corelisters.NamespaceLister
	kinds  []resources.Kind
	known  map[schema.GroupResource]bool
	*workloop.Loop
}

// New registers the controller on factory's Namespace informer. meta deletes and lists the resources
// that discovery lists beyond package resources' kinds (custom resources); when nil, only those kinds
// are emptied and the log says so.
func New(client kubernetes.Interface, meta metadata.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{client: client, meta: meta, nsList: factory.Core().V1().Namespaces().Lister(), known: map[schema.GroupResource]bool{}}
	for _, k := range resources.All() {
		if k.Namespaced {
			c.kinds = append(c.kinds, k)
			c.known[schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}] = true
		}
	}
	if meta == nil {
		log.Warn("namespace controller: no metadata client; only built-in kinds are deleted with their namespace", "controller", "namespace")
	}
	c.Loop = workloop.New("namespace", c.reconcile, log)
	if _, err := factory.Core().V1().Namespaces().Informer().AddEventHandler(c.Handler()); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, name string) error {
	ns, err := c.nsList.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	// Pods go first (as Kubernetes' namespace controller does): nothing else is deleted while one is
	// left, so what a pod uses (configmaps, secrets, service accounts) outlives it.
	d := newDeletion()
	for _, k := range c.kinds {
		if k.GVK.Group == "" && k.Resource == "pods" {
			c.empty(ctx, name, k, d)
		}
	}
	if d.left() == 0 && len(d.errs) == 0 {
		for _, k := range c.kinds {
			if k.GVK.Group != "" || k.Resource != "pods" {
				c.empty(ctx, name, k, d)
			}
		}
		c.emptyDiscovered(ctx, name, d)
	}
	upd := ns.DeepCopy()
	if setConditions(&upd.Status, d.conditions(), metav1.Now()) {
		var err error
		if upd, err = c.client.CoreV1().Namespaces().UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("namespace %s: deletion conditions: %w", name, err)
		}
	}
	if len(d.errs) > 0 || d.discoveryErr != nil {
		return errors.Join(append(d.errs, d.discoveryErr)...)
	}
	if d.left() > 0 {
		c.AddAfter(name, recheck)
		return nil
	}
	if !slices.Contains(upd.Spec.Finalizers, v1.FinalizerKubernetes) {
		return nil
	}
	upd.Spec.Finalizers = slices.DeleteFunc(upd.Spec.Finalizers, func(f v1.FinalizerName) bool { return f == v1.FinalizerKubernetes })
	if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	c.Log().Info("namespace emptied and finalized", "namespace", name)
	return nil
}

// empty deletes every object of kind k in namespace ns (background propagation) and records in d what
// failed and what is left, with the finalizers holding it.
func (c *Controller) empty(ctx context.Context, ns string, k resources.Kind, d *deletion) {
	background := metav1.DeletePropagationBackground
	if err := k.DeleteCollection(ctx, c.client, ns, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil &&
		!apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
		d.errs = append(d.errs, fmt.Errorf("delete %s in %s: %w", k.Resource, ns, err))
		return
	}
	left, err := k.List(ctx, c.client, ns)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			d.errs = append(d.errs, fmt.Errorf("list %s in %s: %w", k.Resource, ns, err))
		}
		return
	}
	if len(left) > 0 {
		d.remaining[schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}] += len(left)
	}
	for _, o := range left {
		for _, f := range o.GetFinalizers() {
			d.finalizers[f]++
		}
	}
}

// emptyDiscovered deletes, through the metadata client, every object in namespace ns of each namespaced
// resource that discovery lists with the list and delete verbs and package resources does not know (the
// custom resources of CRDs, say), and records in d what failed and what is left. A discovery failure
// for some groups is recorded (NamespaceDeletionDiscoveryFailure) and the groups that answered are
// still emptied; the namespace is not finalized until discovery succeeds.
func (c *Controller) emptyDiscovered(ctx context.Context, ns string, d *deletion) {
	if c.meta == nil {
		return
	}
	lists, err := discovery.ServerPreferredNamespacedResources(c.client.Discovery())
	if err != nil {
		d.discoveryErr = err
		if !discovery.IsGroupDiscoveryFailedError(err) {
			return
		}
	}
	background := metav1.DeletePropagationBackground
	for _, l := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "delete"}}, lists) {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			d.errs = append(d.errs, fmt.Errorf("discovery: group version %q: %w", l.GroupVersion, err))
			continue
		}
		for _, r := range l.APIResources {
			gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
			if c.known[gr] {
				continue
			}
			ri := c.meta.Resource(gv.WithResource(r.Name)).Namespace(ns)
			opts := metav1.DeleteOptions{PropagationPolicy: &background}
			if slices.Contains(r.Verbs, "deletecollection") {
				err = ri.DeleteCollection(ctx, opts, metav1.ListOptions{})
			} else {
				err = c.deleteEach(ctx, ri, opts)
			}
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
				d.errs = append(d.errs, fmt.Errorf("delete %s in %s: %w", gr, ns, err))
				continue
			}
			left, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				if !apierrors.IsNotFound(err) {
					d.errs = append(d.errs, fmt.Errorf("list %s in %s: %w", gr, ns, err))
				}
				continue
			}
			if len(left.Items) > 0 {
				d.remaining[gr] += len(left.Items)
			}
			for _, o := range left.Items {
				for _, f := range o.GetFinalizers() {
					d.finalizers[f]++
				}
			}
		}
	}
}

// deleteEach deletes the listed objects one by one, for a resource without deletecollection.
func (c *Controller) deleteEach(ctx context.Context, ri metadata.ResourceInterface, opts metav1.DeleteOptions) error {
	l, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range l.Items {
		if err := ri.Delete(ctx, o.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
