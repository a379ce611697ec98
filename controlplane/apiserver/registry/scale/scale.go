// Package scale is the /scale subresource of workloads: an autoscaling/v1 Scale view of a stored
// object's replica count and selector (kubectl scale, the HPA, the disruption controller's finders).
package scale

import (
	"context"
	"fmt"

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

// Access reads and writes the replica count and selector of one workload kind.
type Access struct {
	// Get returns spec.replicas, status.replicas and the selector of obj.
	Get func(obj runtime.Object) (replicas, statusReplicas int32, selector *metav1.LabelSelector)
	// Set sets spec.replicas of obj.
	Set func(obj runtime.Object, replicas int32)
}

// REST is <workload>/scale, an autoscaling/v1 Scale view of spec.replicas (kubectl scale).
type REST struct {
	store  *store.REST
	access Access
}

// New returns the /scale subresource of the workloads in main.
func New(main *store.REST, access Access) *REST { return &REST{store: main, access: access} }

var _ rest.Patcher = &REST{}

// New returns an empty Scale.
func (r *REST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy is a no-op.
func (r *REST) Destroy() {}

// GroupVersionKind says the subresource speaks autoscaling/v1 Scale.
func (r *REST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// Get returns the workload's Scale.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return r.scale(obj)
}

func (r *REST) scale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	want, have, sel := r.access.Get(obj)
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
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc,
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
		r.access.Set(out, sc.Spec.Replicas)
		return out, nil
	}), nil, nil, false, options)
	if err != nil {
		return nil, false, err
	}
	s, err := r.scale(obj)
	return s, false, err
}
