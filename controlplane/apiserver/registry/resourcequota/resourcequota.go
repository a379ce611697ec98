// Package resourcequota is core/v1 resourcequotas with /status: users write spec.hard and the scopes,
// the resource quota controller (and the ResourceQuota admission plugin, as it charges a request)
// write status.hard and status.used. Status is cleared on create and kept on spec updates, as in
// kube-apiserver.
package resourcequota

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		Table:    table,
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.ResourceQuotaStatus(o.(*corev1.ResourceQuota))
		},
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"resourcequotas": main, "resourcequotas/status": status}, nil
}

// table is kubectl's quota columns after AGE: REQUEST and LIMIT, "<resource>: <used>/<hard>" for each
// status.hard resource, limits.* under LIMIT and the rest under REQUEST, sorted by name.
var table = store.Table{
	AfterAge: []metav1.TableColumnDefinition{
		{Name: "Request", Type: "string", Description: "used/hard of each resource but limits.*"},
		{Name: "Limit", Type: "string", Description: "used/hard of each limits.* resource"},
	},
	Cells: func(o runtime.Object) []any {
		q := o.(*corev1.ResourceQuota)
		var names []string
		for r := range q.Status.Hard {
			names = append(names, string(r))
		}
		slices.Sort(names)
		var requests, limits []string
		for _, r := range names {
			used, hard := q.Status.Used[corev1.ResourceName(r)], q.Status.Hard[corev1.ResourceName(r)]
			cell := fmt.Sprintf("%s: %s/%s", r, used.String(), hard.String())
			if strings.HasPrefix(r, "limits.") {
				limits = append(limits, cell)
			} else {
				requests = append(requests, cell)
			}
		}
		return []any{strings.Join(requests, ", "), strings.Join(limits, ", ")}
	},
}
