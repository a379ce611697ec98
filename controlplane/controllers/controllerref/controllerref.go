// Package controllerref is upstream's ControllerRefManager (pkg/controller/controller_ref_manager.go)
// for the controllers that own objects by label selector (ReplicaSets and Jobs own pods, Deployments
// own ReplicaSets): Claim adopts the live orphans that match the owner's selector (a controller
// ownerReference added by strategic merge patch) and releases the owned objects that stopped matching
// (that ownerReference removed). Both patches carry the object's UID, so an object replaced under the
// same name is left alone.
package controllerref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// PatchFunc applies a strategic merge patch to the named object of the owner's namespace.
type PatchFunc func(ctx context.Context, name string, patch []byte) error

// Manager claims objects for one owner.
type Manager struct {
	// Owner is the controller; Kind its GroupVersionKind, written into the ownerReference.
	Owner metav1.Object
	Kind  schema.GroupVersionKind
	// Selector is the owner's selector, matched against the objects' labels.
	Selector labels.Selector
	// Patch writes one object's ownerReferences.
	Patch PatchFunc
	// Finalizers are added with an adoption and removed with a release (the Job controller's
	// job-tracking finalizer), as upstream's PodControllerRefManager finalizers.
	Finalizers []string
	// CanAdopt, when not nil, is called once before the first adoption of a Claim; an error (the owner
	// is gone or being deleted, read fresh from the API server: upstream's RecheckDeletionTimestamp)
	// stops all adoptions of that Claim. Releases go on.
	CanAdopt func(ctx context.Context) error
	// Log gets one line per adoption and release.
	Log *slog.Logger
}

// Claim returns the objects of candidates the owner controls once orphans are adopted and non-matching
// owned objects released, as upstream's ClaimObject: an owner being deleted adopts and releases
// nothing, objects being deleted are never adopted, objects another controller owns are left alone.
// A candidate that is gone (or replaced) by the time it is patched is skipped, not an error; the other
// errors are joined, and the objects claimed so far are still returned.
func Claim[T metav1.Object](ctx context.Context, m *Manager, candidates []T) ([]T, error) {
	var owned []T
	var errs []error
	adoptChecked := false
	var adoptErr error
	for _, obj := range candidates {
		ref := metav1.GetControllerOf(obj)
		matches := m.Selector.Matches(labels.Set(obj.GetLabels()))
		switch {
		case ref != nil && ref.UID == m.Owner.GetUID() && matches:
			owned = append(owned, obj)
		case ref != nil && ref.UID == m.Owner.GetUID() && m.Owner.GetDeletionTimestamp() == nil:
			if err := m.patch(ctx, obj, m.releasePatch(obj)); err != nil {
				errs = append(errs, err)
				continue
			}
			m.log("released", obj)
		case ref == nil && matches && obj.GetDeletionTimestamp() == nil && m.Owner.GetDeletionTimestamp() == nil:
			if !adoptChecked {
				adoptChecked = true
				if m.CanAdopt != nil {
					adoptErr = m.CanAdopt(ctx)
				}
			}
			if adoptErr != nil {
				continue
			}
			if err := m.patch(ctx, obj, m.adoptPatch(obj)); err != nil {
				errs = append(errs, err)
				continue
			}
			m.log("adopted", obj)
			owned = append(owned, obj)
		}
	}
	return owned, errors.Join(errs...)
}

// adoptPatch adds the owner's controller reference and the finalizers, for obj's UID only.
func (m *Manager) adoptPatch(obj metav1.Object) []byte {
	meta := map[string]any{
		"ownerReferences": []metav1.OwnerReference{*metav1.NewControllerRef(m.Owner, m.Kind)},
		"uid":             obj.GetUID(),
	}
	if len(m.Finalizers) > 0 {
		meta["finalizers"] = m.Finalizers
	}
	return mustJSON(map[string]any{"metadata": meta})
}

// releasePatch removes the owner's reference and the finalizers, for obj's UID only.
func (m *Manager) releasePatch(obj metav1.Object) []byte {
	meta := map[string]any{
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": m.Owner.GetUID()}},
		"uid":             obj.GetUID(),
	}
	if len(m.Finalizers) > 0 {
		meta["$deleteFromPrimitiveList/finalizers"] = m.Finalizers
	}
	return mustJSON(map[string]any{"metadata": meta})
}

// mustJSON marshals maps of strings, UIDs and OwnerReferences, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("controllerref: marshal patch: %v", err))
	}
	return b
}

// patch applies one ownerReferences patch; the object gone, or replaced (the uid check fails as
// Invalid or Conflict), is not an error.
func (m *Manager) patch(ctx context.Context, obj metav1.Object, patch []byte) error {
	err := m.Patch(ctx, obj.GetName(), patch)
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("patch ownerReferences of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
}

func (m *Manager) log(what string, obj metav1.Object) {
	if m.Log != nil {
		m.Log.Info(what+" object", "owner", m.Owner.GetNamespace()+"/"+m.Owner.GetName(), "ownerKind", m.Kind.Kind,
			"object", obj.GetName())
	}
}

// RecheckDeletion returns a CanAdopt that reads the owner fresh through get and refuses adoption when
// it is gone, replaced (another UID) or being deleted (upstream's RecheckDeletionTimestamp).
func RecheckDeletion(owner metav1.Object, get func(ctx context.Context) (metav1.Object, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := get(ctx)
		if err != nil {
			return err
		}
		if fresh.GetUID() != owner.GetUID() {
			return fmt.Errorf("original %s/%s is gone: got uid %v, wanted %v", owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		if fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s/%s has just been deleted at %v", owner.GetNamespace(), owner.GetName(), fresh.GetDeletionTimestamp())
		}
		return nil
	}
}

// Selecting returns the owners whose selector (selectorOf; an invalid or empty one selects nothing)
// matches lbls: the owners to wake for an orphan they may adopt.
func Selecting[T any](owners []T, selectorOf func(T) *metav1.LabelSelector, lbls map[string]string) []T {
	var out []T
	for _, o := range owners {
		if sel, err := metav1.LabelSelectorAsSelector(selectorOf(o)); err == nil && !sel.Empty() && sel.Matches(labels.Set(lbls)) {
			out = append(out, o)
		}
	}
	return out
}

// PatchType is the patch type PatchFunc receives (strategic merge: ownerReferences merge by uid).
const PatchType = types.StrategicMergePatchType

// PodPatch is the PatchFunc of the pods of namespace ns.
func PodPatch(client kubernetes.Interface, ns string) PatchFunc {
	return func(ctx context.Context, name string, patch []byte) error {
		_, err := client.CoreV1().Pods(ns).Patch(ctx, name, PatchType, patch, metav1.PatchOptions{})
		return err
	}
}
