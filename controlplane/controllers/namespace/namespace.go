// Package namespace is the namespace controller: when a Namespace is being deleted (deletionTimestamp
// set, phase Terminating) it deletes its pods first and, once none is left, every other object in it,
// kind by kind (workloads first), waits until nothing is left (graceful pod deletions and finalizers
// included), then removes the "kubernetes" finalizer from spec.finalizers through the namespaces/finalize
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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/nodekit/nodekit/controlplane/controllers/resources"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// recheck is how soon a namespace whose contents are still going away is looked at again.
const recheck = 2 * time.Second

// Controller empties and finalizes terminating namespaces. Queue keys are namespace names.
type Controller struct {
	client kubernetes.Interface
	nsList corelisters.NamespaceLister
	kinds  []resources.Kind
	*workloop.Loop
}

// New registers the controller on factory's Namespace informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{client: client, nsList: factory.Core().V1().Namespaces().Lister()}
	for _, k := range resources.All() {
		if k.Namespaced {
			c.kinds = append(c.kinds, k)
		}
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
	if len(d.errs) > 0 {
		return errors.Join(d.errs...)
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
