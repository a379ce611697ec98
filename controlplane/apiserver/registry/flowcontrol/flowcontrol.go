// Package flowcontrol is flowcontrol.apiserver.k8s.io/v1 (API Priority and Fairness), cluster-scoped:
// flowschemas and prioritylevelconfigurations, each with /status. k8s.io/apiserver's APF filter acts on
// them (its config controller watches both and writes the FlowSchemas' Dangling condition); Ensure keeps
// the bootstrap configuration in place, as kube-apiserver's priority-and-fairness-config-producer.
package flowcontrol

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns the flowcontrol.apiserver.k8s.io/v1 endpoints keyed by resource path.
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	fs, fsStatus, err := store.New(getter, store.Spec{Resource: flowcontrolv1.Resource("flowschemas"), Singular: "flowschema",
		StatusMetadata: store.StatusKeepsStoredObjectMeta,
		NewFunc:        func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
		NewList:        func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		Strategy: store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList {
			return validation.FlowSchema(o.(*flowcontrolv1.FlowSchema))
		}),
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.FlowSchemaStatus(o.(*flowcontrolv1.FlowSchema))
		},
		Table: flowSchemaTable})
	if err != nil {
		return nil, err
	}
	pl, plStatus, err := store.New(getter, store.Spec{Resource: flowcontrolv1.Resource("prioritylevelconfigurations"), Singular: "prioritylevelconfiguration",
		StatusMetadata: store.StatusKeepsStoredObjectMeta,
		NewFunc:        func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		NewList:        func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
		Strategy: store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList {
			return validation.PriorityLevelConfiguration(o.(*flowcontrolv1.PriorityLevelConfiguration))
		}),
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.PriorityLevelConfigurationStatus(o.(*flowcontrolv1.PriorityLevelConfiguration))
		},
		Table: priorityLevelTable})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"flowschemas": fs, "flowschemas/status": fsStatus,
		"prioritylevelconfigurations": pl, "prioritylevelconfigurations/status": plStatus}, nil
}
