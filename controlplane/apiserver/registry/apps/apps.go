// Package apps is apps/v1: deployments, replicasets, daemonsets and statefulsets, each with /status (the
// controllers write status, users write spec; generation counts spec changes) and, for deployments,
// replicasets and statefulsets, /scale; and controllerrevisions, the DaemonSet and StatefulSet
// controllers' history (data is immutable).
package apps

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/scale"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns the apps/v1 endpoints keyed by resource path.
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	m := map[string]rest.Storage{}
	add := func(spec store.Spec, sc *scale.Access) error {
		main, status, err := store.New(getter, spec)
		if err != nil {
			return err
		}
		r := spec.Resource.Resource
		m[r] = main
		if status != nil {
			m[r+"/status"] = status
		}
		if sc != nil {
			m[r+"/scale"] = scale.New(main, *sc)
		}
		return nil
	}
	dep := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList { return validation.Deployment(o.(*appsv1.Deployment)) })
	dep.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return append(validation.Deployment(o.(*appsv1.Deployment)),
			validation.WorkloadUpdate(o.(*appsv1.Deployment).Spec.Selector, old.(*appsv1.Deployment).Spec.Selector)...)
	}
	if err := add(store.Spec{Resource: appsv1.Resource("deployments"), Singular: "deployment", ShortNames: []string{"deploy"},
		Categories: []string{"all"}, NewFunc: func() runtime.Object { return &appsv1.Deployment{} },
		NewList: func() runtime.Object { return &appsv1.DeploymentList{} }, Strategy: dep, StatusMetadata: store.StatusResetsLabels, Table: replicasTable(func(o runtime.Object) (int32, int32, int32) {
			d := o.(*appsv1.Deployment)
			return deref(d.Spec.Replicas), d.Status.ReadyReplicas, d.Status.UpdatedReplicas
		}, "Up-to-date")}, &deploymentScale); err != nil {
		return nil, err
	}
	rs := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList { return validation.ReplicaSet(o.(*appsv1.ReplicaSet)) })
	rs.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return append(validation.ReplicaSet(o.(*appsv1.ReplicaSet)),
			validation.WorkloadUpdate(o.(*appsv1.ReplicaSet).Spec.Selector, old.(*appsv1.ReplicaSet).Spec.Selector)...)
	}
	if err := add(store.Spec{Resource: appsv1.Resource("replicasets"), Singular: "replicaset", ShortNames: []string{"rs"},
		Categories: []string{"all"}, NewFunc: func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} }, Strategy: rs, Table: replicasTable(func(o runtime.Object) (int32, int32, int32) {
			r := o.(*appsv1.ReplicaSet)
			return deref(r.Spec.Replicas), r.Status.ReadyReplicas, r.Status.Replicas
		}, "Current")}, &replicaSetScale); err != nil {
		return nil, err
	}
	ds := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList { return validation.DaemonSet(o.(*appsv1.DaemonSet)) })
	ds.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return append(validation.DaemonSet(o.(*appsv1.DaemonSet)),
			validation.WorkloadUpdate(o.(*appsv1.DaemonSet).Spec.Selector, old.(*appsv1.DaemonSet).Spec.Selector)...)
	}
	if err := add(store.Spec{Resource: appsv1.Resource("daemonsets"), Singular: "daemonset", ShortNames: []string{"ds"},
		Categories: []string{"all"}, NewFunc: func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList: func() runtime.Object { return &appsv1.DaemonSetList{} }, Strategy: ds, Table: replicasTable(func(o runtime.Object) (int32, int32, int32) {
			d := o.(*appsv1.DaemonSet)
			return d.Status.DesiredNumberScheduled, d.Status.NumberReady, d.Status.UpdatedNumberScheduled
		}, "Up-to-date")}, nil); err != nil {
		return nil, err
	}
	ss := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList { return validation.StatefulSet(o.(*appsv1.StatefulSet)) })
	ss.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return append(validation.StatefulSet(o.(*appsv1.StatefulSet)),
			validation.StatefulSetUpdate(o.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet))...)
	}
	if err := add(store.Spec{Resource: appsv1.Resource("statefulsets"), Singular: "statefulset", ShortNames: []string{"sts"},
		Categories: []string{"all"}, NewFunc: func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList: func() runtime.Object { return &appsv1.StatefulSetList{} }, Strategy: ss, Table: store.Table{
			Columns: []metav1.TableColumnDefinition{store.Column("Ready", "ready/desired replicas")},
			Cells: func(o runtime.Object) []any {
				s := o.(*appsv1.StatefulSet)
				return []any{store.Ratio(int(s.Status.ReadyReplicas), int(deref(s.Spec.Replicas)))}
			},
		}}, &statefulSetScale); err != nil {
		return nil, err
	}
	cr := store.NewStrategy(true, false, func(o runtime.Object) field.ErrorList {
		return validation.ControllerRevision(o.(*appsv1.ControllerRevision))
	})
	cr.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return append(validation.ControllerRevision(o.(*appsv1.ControllerRevision)),
			validation.ControllerRevisionUpdate(o.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision))...)
	}
	if err := add(store.Spec{Resource: appsv1.Resource("controllerrevisions"), Singular: "controllerrevision",
		NewFunc: func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList: func() runtime.Object { return &appsv1.ControllerRevisionList{} }, Strategy: cr,
		Table: store.Table{
			Columns: []metav1.TableColumnDefinition{{Name: "Controller", Type: "string", Description: "the owning controller"},
				{Name: "Revision", Type: "integer", Description: "the revision number"}},
			Cells: func(o runtime.Object) []any {
				r := o.(*appsv1.ControllerRevision)
				owner := "<none>"
				if ref := metav1.GetControllerOf(r); ref != nil {
					owner = strings.ToLower(ref.Kind) + "." + strings.Split(ref.APIVersion, "/")[0] + "/" + ref.Name
				}
				return []any{owner, r.Revision}
			},
		}}, nil); err != nil {
		return nil, err
	}
	return m, nil
}

var deploymentScale = scale.Access{
	Get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
		d := o.(*appsv1.Deployment)
		return deref(d.Spec.Replicas), d.Status.Replicas, d.Spec.Selector
	},
	Set: func(o runtime.Object, n int32) { o.(*appsv1.Deployment).Spec.Replicas = &n },
}

var replicaSetScale = scale.Access{
	Get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
		r := o.(*appsv1.ReplicaSet)
		return deref(r.Spec.Replicas), r.Status.Replicas, r.Spec.Selector
	},
	Set: func(o runtime.Object, n int32) { o.(*appsv1.ReplicaSet).Spec.Replicas = &n },
}

var statefulSetScale = scale.Access{
	Get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
		s := o.(*appsv1.StatefulSet)
		return deref(s.Spec.Replicas), s.Status.Replicas, s.Spec.Selector
	},
	Set: func(o runtime.Object, n int32) { o.(*appsv1.StatefulSet).Spec.Replicas = &n },
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// replicasTable renders READY (ready/desired), a third count column and AGE.
func replicasTable(counts func(runtime.Object) (desired, ready, third int32), thirdName string) store.Table {
	return store.Table{
		Columns: []metav1.TableColumnDefinition{store.Column("Ready", "ready/desired replicas"),
			{Name: thirdName, Type: "integer", Description: thirdName + " replicas"}},
		Cells: func(o runtime.Object) []any {
			d, r, t := counts(o)
			return []any{store.Ratio(int(r), int(d)), int64(t)}
		},
	}
}
