// Package namespace is the namespaces resource (cluster-scoped, with /status). New namespaces are
// Active. Deletion empties the namespace first (see Delete in delete.go).
package namespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

func newStore(getter generic.RESTOptionsGetter) (*store.REST, *store.StatusREST, error) {
	s := store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList { return validation.Namespace(o.(*corev1.Namespace)) })
	s.PrepareCreateFn = func(_ context.Context, o runtime.Object) {
		ns := o.(*corev1.Namespace)
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
	}
	s.PrepareUpdateFn = func(_ context.Context, o, old runtime.Object) {
		// spec.finalizers changes only through the cleaner (the /finalize step of Kubernetes).
		o.(*corev1.Namespace).Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
	}
	main, _, err := store.New(getter, store.Spec{
		Resource:   corev1.Resource("namespaces"),
		Singular:   "namespace",
		ShortNames: []string{"ns"},
		NewFunc:    func() runtime.Object { return &corev1.Namespace{} },
		NewList:    func() runtime.Object { return &corev1.NamespaceList{} },
		Strategy:   s,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(o.(*corev1.Namespace).Status.Phase)}
		},
		Table: store.Table{
			Columns: []metav1.TableColumnDefinition{store.Column("Status", "phase")},
			Cells:   func(o runtime.Object) []any { return []any{string(o.(*corev1.Namespace).Status.Phase)} },
		},
	})
	if err != nil {
		return nil, nil, err
	}
	// A Terminating namespace without metadata.finalizers is removed by an update only once
	// spec.finalizers is empty too (the generic store would remove it on any update, of its status
	// or labels, before the namespace controller has emptied it).
	main.ShouldDeleteDuringUpdate = func(_ context.Context, _ string, obj, _ runtime.Object) bool {
		return len(obj.(*corev1.Namespace).Spec.Finalizers) == 0
	}
	return main, store.Subresource(main, &statusStrategy{store.StatusStrategy{Strategy: s, ValidateStatusFn: validateStatus}}), nil
}

// statusStrategy is namespaces/status, as Kubernetes' namespace status strategy: an update or patch
// keeps the stored spec and takes everything else, metadata (labels, annotations) included.
type statusStrategy struct {
	store.StatusStrategy
}

// PrepareForUpdate keeps the stored spec.
func (*statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*corev1.Namespace).Spec = old.(*corev1.Namespace).Spec
}

// validateStatus checks status.phase against metadata.deletionTimestamp: Active while it is unset,
// Terminating once it is set.
func validateStatus(obj, _ runtime.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	want, when := corev1.NamespaceActive, "empty"
	if !ns.DeletionTimestamp.IsZero() {
		want, when = corev1.NamespaceTerminating, "not empty"
	}
	if ns.Status.Phase != want {
		return field.ErrorList{field.Invalid(field.NewPath("status", "phase"), ns.Status.Phase,
			fmt.Sprintf("may only be '%s' if `deletionTimestamp` is %s", want, when))}
	}
	return nil
}
