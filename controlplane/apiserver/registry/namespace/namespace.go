// Package namespace is the namespaces resource (cluster-scoped, with /status). New namespaces are
// Active. Deletion empties the namespace first (see Delete in delete.go).
package namespace

import (
	"context"

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
	return store.New(getter, store.Spec{
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
}
