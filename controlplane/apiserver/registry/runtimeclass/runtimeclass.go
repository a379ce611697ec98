// Package runtimeclass serves node.k8s.io/v1 runtimeclasses (cluster-scoped), validated by
// validation.RuntimeClass. The RuntimeClass admission plugin (package admission) applies a class's
// overhead and scheduling to the pods that name it; the kubelet passes its handler to CRI RunPodSandbox.
package runtimeclass

import (
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns node.k8s.io/v1 "runtimeclasses".
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
		return validation.RuntimeClass(o.(*nodev1.RuntimeClass), nil)
	})
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.RuntimeClass(o.(*nodev1.RuntimeClass), old.(*nodev1.RuntimeClass))
	}
	rc, _, err := store.New(getter, store.Spec{
		Resource: nodev1.Resource("runtimeclasses"), Singular: "runtimeclass",
		NewFunc:  func() runtime.Object { return &nodev1.RuntimeClass{} },
		NewList:  func() runtime.Object { return &nodev1.RuntimeClassList{} },
		Strategy: s,
		Table: store.Table{
			Columns: []metav1.TableColumnDefinition{store.Column("Handler", "handler")},
			Cells:   func(o runtime.Object) []any { return []any{o.(*nodev1.RuntimeClass).Handler} },
		},
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"runtimeclasses": rc}, nil
}
