package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

// IsDefaultClassAnnotation marks the default StorageClass (value "true"), as upstream.
const IsDefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// DefaultStorageClass is Kubernetes' DefaultStorageClass plugin: a new PersistentVolumeClaim that
// names no storage class (spec.storageClassName unset, not "") gets the default StorageClass, the one
// annotated storageclass.kubernetes.io/is-default-class=true (the newest when several are; none when
// there is none).
type DefaultStorageClass struct {
	Classes storagelisters.StorageClassLister
}

var _ admission.MutationInterface = &DefaultStorageClass{}

// Handles claim creation.
func (p *DefaultStorageClass) Handles(op admission.Operation) bool { return op == admission.Create }

// Admit sets the default class on a claim without one.
func (p *DefaultStorageClass) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("persistentvolumeclaims") || a.GetSubresource() != "" {
		return nil
	}
	claim, ok := a.GetObject().(*corev1.PersistentVolumeClaim)
	if !ok || claim.Spec.StorageClassName != nil {
		return nil
	}
	classes, err := p.Classes.List(labels.Everything())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("listing storage classes: %w", err))
	}
	def := newestDefault(classes, IsDefaultClassAnnotation)
	if def != nil {
		name := def.Name
		claim.Spec.StorageClassName = &name
	}
	return nil
}
