package admission

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"
)

// PVCProtectionFinalizer keeps a claim that a pod uses until no pod uses it (upstream's name).
const PVCProtectionFinalizer = "kubernetes.io/pvc-protection"

// StorageObjectInUseProtection is Kubernetes' plugin of that name, for claims: every new
// PersistentVolumeClaim gets the kubernetes.io/pvc-protection finalizer, which the PersistentVolume
// controller removes once the claim is being deleted and no pod uses it.
type StorageObjectInUseProtection struct{}

var _ admission.MutationInterface = StorageObjectInUseProtection{}

// Handles claim creation.
func (StorageObjectInUseProtection) Handles(op admission.Operation) bool {
	return op == admission.Create
}

// Admit adds the finalizer.
func (StorageObjectInUseProtection) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("persistentvolumeclaims") || a.GetSubresource() != "" {
		return nil
	}
	claim, ok := a.GetObject().(*corev1.PersistentVolumeClaim)
	if ok && !slices.Contains(claim.Finalizers, PVCProtectionFinalizer) {
		claim.Finalizers = append(claim.Finalizers, PVCProtectionFinalizer)
	}
	return nil
}
