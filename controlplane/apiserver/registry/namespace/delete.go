package namespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// REST is the namespaces endpoint with Kubernetes' two-phase deletion: deleting a namespace whose
// spec.finalizers is not empty (new namespaces carry "kubernetes") only marks it Terminating
// (deletionTimestamp, status.phase). The namespace controller empties it and removes its finalizer
// through namespaces/finalize; a Terminating namespace whose finalizers are all gone is removed, by that
// finalize call or by a later delete.
type REST struct {
	*store.REST
}

// NewStorage returns "namespaces", "namespaces/status" and "namespaces/finalize".
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, *REST, error) {
	main, status, err := newStore(getter)
	if err != nil {
		return nil, nil, err
	}
	r := &REST{REST: main}
	return map[string]rest.Storage{"namespaces": r, "namespaces/status": status, "namespaces/finalize": &FinalizeREST{ns: r}}, r, nil
}

// Delete removes a namespace without spec.finalizers, else marks it Terminating and returns it (200,
// not yet gone). Preconditions in options (uid, resourceVersion) are honoured.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	if len(obj.(*corev1.Namespace).Spec.Finalizers) == 0 {
		return r.REST.Delete(ctx, name, deleteValidation, options)
	}
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

// FinalizeREST is namespaces/finalize: it changes only spec.finalizers.
type FinalizeREST struct {
	ns *REST
}

// New returns an empty Namespace.
func (f *FinalizeREST) New() runtime.Object { return &corev1.Namespace{} }

// Destroy is a no-op.
func (f *FinalizeREST) Destroy() {}

// Update sets spec.finalizers from the request's object (optimistic concurrency on its
// resourceVersion); a Terminating namespace left without finalizers is then removed.
func (f *FinalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	key, err := f.ns.KeyFunc(ctx, name)
	if err != nil {
		return nil, false, err
	}
	out := &corev1.Namespace{}
	dryRun := options != nil && len(options.DryRun) > 0
	err = f.ns.Storage.GuaranteedUpdate(ctx, key, out, false, nil, func(o runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		cur := o.(*corev1.Namespace)
		upd, err := objInfo.UpdatedObject(ctx, cur.DeepCopy())
		if err != nil {
			return nil, nil, err
		}
		want, ok := upd.(*corev1.Namespace)
		if !ok {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("expected a Namespace, got %T", upd))
		}
		if want.ResourceVersion != "" && want.ResourceVersion != cur.ResourceVersion {
			return nil, nil, apierrors.NewConflict(corev1.Resource("namespaces"), name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		next := cur.DeepCopy()
		next.Spec.Finalizers = want.Spec.Finalizers
		if updateValidation != nil {
			if err := updateValidation(ctx, next, cur); err != nil {
				return nil, nil, err
			}
		}
		return next, nil, nil
	}, dryRun, nil)
	if err != nil {
		return nil, false, err
	}
	if out.DeletionTimestamp != nil && len(out.Spec.Finalizers) == 0 && !dryRun {
		uid := out.UID
		if err := f.ns.Storage.Delete(ctx, key, &corev1.Namespace{}, &storage.Preconditions{UID: &uid}, storage.ValidateAllObjectFunc, false, nil, storage.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, false, err
		}
	}
	return out, false, nil
}
