// Package namespace is the namespace controller: when a Namespace is being deleted (deletionTimestamp
// set, phase Terminating) it deletes every object in it, kind by kind (workloads first), waits until
// nothing is left (graceful pod deletions included), then removes the "kubernetes" finalizer from
// spec.finalizers through the namespaces/finalize subresource so the API server can remove the
// Namespace itself.
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
	background := metav1.DeletePropagationBackground
	var errs []error
	remaining := 0
	for _, k := range c.kinds {
		if err := k.DeleteCollection(ctx, c.client, name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			errs = append(errs, fmt.Errorf("delete %s in %s: %w", k.Resource, name, err))
			continue
		}
		n, err := k.Count(ctx, c.client, name, 1)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("list %s in %s: %w", k.Resource, name, err))
			continue
		}
		remaining += n
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if remaining > 0 {
		c.AddAfter(name, recheck)
		return nil
	}
	if !slices.Contains(ns.Spec.Finalizers, v1.FinalizerKubernetes) {
		return nil
	}
	upd := ns.DeepCopy()
	upd.Spec.Finalizers = slices.DeleteFunc(upd.Spec.Finalizers, func(f v1.FinalizerName) bool { return f == v1.FinalizerKubernetes })
	if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	c.Log().Info("namespace emptied and finalized", "namespace", name)
	return nil
}
