// Package policy is policy/v1: poddisruptionbudgets with /status. The disruption controller
// (controlplane/controllers/disruption) keeps the status; pods/eviction (registry/pod) honours it.
package policy

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns the policy/v1 endpoints keyed by resource path, and the PodDisruptionBudget
// store (pods/eviction reads and updates budgets through it).
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, *store.REST, error) {
	s := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		return validation.PodDisruptionBudget(o.(*policyv1.PodDisruptionBudget))
	})
	main, status, err := store.New(getter, store.Spec{Resource: policyv1.Resource("poddisruptionbudgets"), Singular: "poddisruptionbudget",
		ShortNames: []string{"pdb"},
		NewFunc:    func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList:    func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} }, Strategy: s,
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.PodDisruptionBudgetStatus(o.(*policyv1.PodDisruptionBudget))
		},
		Table: pdbTable})
	if err != nil {
		return nil, nil, err
	}
	return map[string]rest.Storage{"poddisruptionbudgets": main, "poddisruptionbudgets/status": status}, main, nil
}

var pdbTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("Min Available", "spec.minAvailable, or N/A"),
		store.Column("Max Unavailable", "spec.maxUnavailable, or N/A"),
		store.Column("Allowed Disruptions", "status.disruptionsAllowed"),
	},
	Cells: func(o runtime.Object) []any {
		p := o.(*policyv1.PodDisruptionBudget)
		minA, maxU := "N/A", "N/A"
		if p.Spec.MinAvailable != nil {
			minA = p.Spec.MinAvailable.String()
		}
		if p.Spec.MaxUnavailable != nil {
			maxU = p.Spec.MaxUnavailable.String()
		}
		return []any{minA, maxU, int64(p.Status.DisruptionsAllowed)}
	},
}
