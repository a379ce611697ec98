// Package scheduling serves nodekit's scheduling.k8s.io/v1 API: priorityclasses (cluster-scoped), with
// validation.PriorityClass and validation.PriorityClassUpdate (value and preemptionPolicy immutable). That
// at most one class is globalDefault is checked by the Priority admission plugin, which resolves the
// classes into pods' spec.priority; the bootstrap classes are reconciled by EnsureSystemClasses.
package scheduling

import (
	"context"
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns scheduling.k8s.io/v1 "priorityclasses".
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
		return validation.PriorityClass(o.(*schedulingv1.PriorityClass))
	})
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.PriorityClassUpdate(o.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass))
	}
	pcs, _, err := store.New(getter, store.Spec{
		Resource: schedulingv1.Resource("priorityclasses"), Singular: "priorityclass", ShortNames: []string{"pc"},
		NewFunc:  func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:  func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Strategy: s,
		Table:    classTable,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"priorityclasses": pcs}, nil
}

var classTable = store.Table{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Value", Type: "integer", Description: "value"},
		{Name: "Global-Default", Type: "boolean", Description: "globalDefault"},
	},
	AfterAge: []metav1.TableColumnDefinition{{Name: "PreemptionPolicy", Type: "string", Description: "preemptionPolicy"}},
	Cells: func(o runtime.Object) []any {
		pc := o.(*schedulingv1.PriorityClass)
		policy := ""
		if pc.PreemptionPolicy != nil {
			policy = string(*pc.PreemptionPolicy)
		}
		return []any{int64(pc.Value), pc.GlobalDefault, policy}
	},
}

// EnsureSystemClasses creates the bootstrap priority classes (system-node-critical,
// system-cluster-critical) that are missing, as kube-apiserver's "scheduling/bootstrap-system-priority-classes"
// post-start hook does. An existing class is left alone: value and preemptionPolicy are immutable and
// validation keeps a system-named class identical in value and globalDefault.
func EnsureSystemClasses(ctx context.Context, client kubernetes.Interface) error {
	pcs := client.SchedulingV1().PriorityClasses()
	for _, pc := range validation.SystemPriorityClasses() {
		_, err := pcs.Get(ctx, pc.Name, metav1.GetOptions{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get priorityclass %s: %w", pc.Name, err)
		}
		if _, err := pcs.Create(ctx, &pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create priorityclass %s: %w", pc.Name, err)
		}
	}
	return nil
}
