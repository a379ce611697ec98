// Package node is the nodes resource (cluster-scoped, with /status). A node's status may be set on
// create, since kubelets register with their addresses and capacity.
package node

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns "nodes" and "nodes/status", and the main store (the kubelet connection reads it).
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, *store.REST, error) {
	s := store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList { return validation.Node(o.(*corev1.Node)) })
	s.KeepStatusOnCreate = true
	main, status, err := store.New(getter, store.Spec{
		Resource:   corev1.Resource("nodes"),
		Singular:   "node",
		ShortNames: []string{"no"},
		NewFunc:    func() runtime.Object { return &corev1.Node{} },
		NewList:    func() runtime.Object { return &corev1.NodeList{} },
		Strategy:   s,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"spec.unschedulable": strconv.FormatBool(o.(*corev1.Node).Spec.Unschedulable)}
		},
		Table: table,
	})
	if err != nil {
		return nil, nil, err
	}
	return map[string]rest.Storage{"nodes": main, "nodes/status": status}, main, nil
}
