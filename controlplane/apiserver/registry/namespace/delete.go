package namespace

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// Collection is a namespaced resource the cleaner empties.
type Collection interface {
	rest.Lister
	rest.CollectionDeleter
}

// REST is the namespaces endpoint. Deleting a namespace marks it Terminating (deletionTimestamp set,
// status.phase Terminating); the cleaner then deletes everything in it and finally the namespace itself,
// which is what Kubernetes' namespace finalizer ("kubernetes" in spec.finalizers) and namespace controller
// do. nodekit runs that cleaner inside the API server.
type REST struct {
	*store.REST
	collections []Collection
}

// NewStorage returns "namespaces" and "namespaces/status"; collections are the resources to empty.
func NewStorage(getter generic.RESTOptionsGetter, collections []Collection) (map[string]rest.Storage, *REST, error) {
	main, status, err := newStore(getter)
	if err != nil {
		return nil, nil, err
	}
	r := &REST{REST: main, collections: collections}
	return map[string]rest.Storage{"namespaces": r, "namespaces/status": status}, r, nil
}

// Delete marks the namespace Terminating and returns it (200, not yet gone); an already terminating
// namespace is returned as it is. Preconditions in options (uid, resourceVersion) are honoured.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	key, err := r.KeyFunc(ctx, name)
	if err != nil {
		return nil, false, err
	}
	var pre *storage.Preconditions
	if options != nil && options.Preconditions != nil {
		pre = &storage.Preconditions{UID: options.Preconditions.UID, ResourceVersion: options.Preconditions.ResourceVersion}
	}
	out := &corev1.Namespace{}
	dryRun := options != nil && len(options.DryRun) > 0
	err = r.Storage.GuaranteedUpdate(ctx, key, out, false, pre, storage.SimpleUpdate(func(o runtime.Object) (runtime.Object, error) {
		ns := o.(*corev1.Namespace)
		if deleteValidation != nil {
			if err := deleteValidation(ctx, ns.DeepCopy()); err != nil {
				return nil, err
			}
		}
		if ns.DeletionTimestamp != nil {
			return ns, nil
		}
		now := metav1.Now()
		ns.DeletionTimestamp = &now
		ns.Status.Phase = corev1.NamespaceTerminating
		return ns, nil
	}), dryRun, nil)
	if err != nil {
		return nil, false, err
	}
	return out, false, nil
}

// RunCleaner empties and removes terminating namespaces every two seconds until ctx is done. It picks
// up namespaces left Terminating by an earlier run of the server.
func (r *REST) RunCleaner(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		obj, err := r.List(ctx, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.phase", string(corev1.NamespaceTerminating))})
		if err != nil {
			slog.Warn("namespace cleaner: list", "err", err)
			continue
		}
		for _, ns := range obj.(*corev1.NamespaceList).Items {
			if err := r.empty(ctx, ns.Name); err != nil {
				slog.Info("namespace cleaner: not empty yet", "namespace", ns.Name, "reason", err)
				continue
			}
			if err := r.finalize(ctx, &ns); err != nil && !apierrors.IsNotFound(err) {
				slog.Warn("namespace cleaner: remove", "namespace", ns.Name, "err", err)
				continue
			}
			slog.Info("namespace deleted", "namespace", ns.Name)
		}
	}
}

// empty deletes every object in namespace (pods gracefully) and returns an error while any remains.
func (r *REST) empty(ctx context.Context, namespace string) error {
	nsCtx := genericapirequest.WithNamespace(ctx, namespace)
	remaining := 0
	for _, c := range r.collections {
		if _, err := c.DeleteCollection(nsCtx, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}, &metainternalversion.ListOptions{}); err != nil {
			return err
		}
		list, err := c.List(nsCtx, &metainternalversion.ListOptions{})
		if err != nil {
			return err
		}
		if n := meta.LenList(list); n > 0 {
			remaining += n
		}
	}
	if remaining > 0 {
		return errRemaining(remaining)
	}
	return nil
}

type errRemaining int

func (e errRemaining) Error() string { return fmt.Sprintf("%d objects remaining", int(e)) }

// finalize clears spec.finalizers and removes the namespace from storage.
func (r *REST) finalize(ctx context.Context, ns *corev1.Namespace) error {
	key, err := r.KeyFunc(ctx, ns.Name)
	if err != nil {
		return err
	}
	uid := ns.UID
	return r.Storage.Delete(ctx, key, &corev1.Namespace{}, &storage.Preconditions{UID: &uid}, storage.ValidateAllObjectFunc, false, nil, storage.DeleteOptions{})
}
