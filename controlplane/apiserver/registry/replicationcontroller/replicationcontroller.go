// Package replicationcontroller is core/v1 replicationcontrollers with /status (the controller
// writes status, users write spec; generation counts spec changes) and /scale. Unlike apps/v1
// workloads an RC's selector is a label map and may change.
package replicationcontroller

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/scale"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns replicationcontrollers, replicationcontrollers/status and
// replicationcontrollers/scale.
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	strategy := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		return validation.ReplicationController(o.(*corev1.ReplicationController))
	})
	main, status, err := store.New(getter, store.Spec{
		Resource: corev1.Resource("replicationcontrollers"), Singular: "replicationcontroller", ShortNames: []string{"rc"},
		Categories: []string{"all"},
		NewFunc:    func() runtime.Object { return &corev1.ReplicationController{} },
		NewList:    func() runtime.Object { return &corev1.ReplicationControllerList{} },
		Strategy:   strategy,
		StatusValidate: func(o, _ runtime.Object) field.ErrorList {
			return validation.ReplicationControllerStatus(o.(*corev1.ReplicationController))
		},
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(o.(*corev1.ReplicationController).Status.Replicas))}
		},
		Table: table,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"replicationcontrollers":        main,
		"replicationcontrollers/status": status,
		"replicationcontrollers/scale": scale.New(main, scale.Access{
			Get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
				rc := o.(*corev1.ReplicationController)
				return replicas(rc), rc.Status.Replicas, &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
			},
			Set: func(o runtime.Object, n int32) { o.(*corev1.ReplicationController).Spec.Replicas = &n },
		}),
	}, nil
}

func replicas(rc *corev1.ReplicationController) int32 {
	if rc.Spec.Replicas == nil {
		return 0
	}
	return *rc.Spec.Replicas
}

// table is kubectl's RC columns: DESIRED, CURRENT, READY (and AGE).
var table = store.Table{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Desired", Type: "integer", Description: "spec.replicas"},
		{Name: "Current", Type: "integer", Description: "status.replicas"},
		{Name: "Ready", Type: "integer", Description: "status.readyReplicas"},
	},
	Cells: func(o runtime.Object) []any {
		rc := o.(*corev1.ReplicationController)
		return []any{int64(replicas(rc)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas)}
	},
}
