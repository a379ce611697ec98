package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// scaleAccess reads and writes the replica count and selector of a workload.
type scaleAccess struct {
	get func(obj runtime.Object) (replicas, statusReplicas int32, selector *metav1.LabelSelector)
	set func(obj runtime.Object, replicas int32)
}

var deploymentScale = scaleAccess{
	get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
		d := o.(*appsv1.Deployment)
		return deref(d.Spec.Replicas), d.Status.Replicas, d.Spec.Selector
	},
	set: func(o runtime.Object, n int32) { o.(*appsv1.Deployment).Spec.Replicas = &n },
}

var replicaSetScale = scaleAccess{
	get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
		r := o.(*appsv1.ReplicaSet)
		return deref(r.Spec.Replicas), r.Status.Replicas, r.Spec.Selector
	},
	set: func(o runtime.Object, n int32) { o.(*appsv1.ReplicaSet).Spec.Replicas = &n },
}

var statefulSetScale = scaleAccess{
	get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
		s := o.(*appsv1.StatefulSet)
		return deref(s.Spec.Replicas), s.Status.Replicas, s.Spec.Selector
	},
	set: func(o runtime.Object, n int32) { o.(*appsv1.StatefulSet).Spec.Replicas = &n },
}

// ScaleREST is <workload>/scale, an autoscaling/v1 Scale view of spec.replicas (kubectl scale).
type ScaleREST struct {
	store  *store.REST
	access scaleAccess
}

var _ rest.Patcher = &ScaleREST{}

// New returns an empty Scale.
func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy is a no-op.
func (r *ScaleREST) Destroy() {}

// GroupVersionKind says the subresource speaks autoscaling/v1 Scale.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// Get returns the workload's Scale.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return r.scale(obj)
}

func (r *ScaleREST) scale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	want, have, sel := r.access.get(obj)
	s := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: want},
		Status: autoscalingv1.ScaleStatus{Replicas: have},
	}
	if sel != nil {
		if ls, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			s.Status.Selector = ls.String()
		}
	}
	return s, nil
}

// Update sets spec.replicas from the Scale (optimistic concurrency on the Scale's resourceVersion).
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc,
	_ rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
		old, err := r.scale(oldObj)
		if err != nil {
			return nil, err
		}
		upd, err := objInfo.UpdatedObject(ctx, old)
		if err != nil {
			return nil, err
		}
		sc, ok := upd.(*autoscalingv1.Scale)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("expected Scale, got %T", upd))
		}
		if sc.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: autoscalingv1.GroupName, Kind: "Scale"}, name,
				field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), sc.Spec.Replicas, "must be greater than or equal to 0")})
		}
		out := oldObj.DeepCopyObject()
		if sc.ResourceVersion != "" {
			m, _ := meta.Accessor(out)
			m.SetResourceVersion(sc.ResourceVersion)
		}
		r.access.set(out, sc.Spec.Replicas)
		return out, nil
	}), nil, nil, false, options)
	if err != nil {
		return nil, false, err
	}
	s, err := r.scale(obj)
	return s, false, err
}
