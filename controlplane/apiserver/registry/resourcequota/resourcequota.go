// Package resourcequota is core/v1 resourcequotas with /status: users write spec.hard and the scopes,
// the resource quota controller (and the ResourceQuota admission plugin, as it charges a request)
// write status.hard and status.used. Status is cleared on create and kept on spec updates, as in
// kube-apiserver.
package resourcequota

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns resourcequotas and resourcequotas/status.
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	strategy := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		return validation.ResourceQuota(o.(*corev1.ResourceQuota))
	})
	strategy.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.ResourceQuotaUpdate(o.(*corev1.ResourceQuota), old.(*corev1.ResourceQuota))
	}
	main, status, err := store.New(getter, store.Spec{
		Resource: corev1.Resource("resourcequotas"), Singular: "resourcequota", ShortNames: []string{"quota"},
		NewFunc:  func() runtime.Object { return &corev1.ResourceQuota{} },
		NewList:  func() runtime.Object { return &corev1.ResourceQuotaList{} },
		Strategy: strategy,
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.ResourceQuotaStatus(o.(*corev1.ResourceQuota))
		},
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"resourcequotas": main, "resourcequotas/status": status}, nil
}
