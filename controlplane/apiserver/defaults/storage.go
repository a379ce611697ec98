package defaults

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// registerStorage defaults StorageClasses, PersistentVolumes and PersistentVolumeClaims as
// kube-apiserver does (pkg/apis/storage/v1/defaults.go, pkg/apis/core/v1/defaults.go).
func registerStorage(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&storagev1.StorageClass{}, func(o any) { StorageClass(o.(*storagev1.StorageClass)) })
	s.AddTypeDefaultingFunc(&corev1.PersistentVolume{}, func(o any) { PersistentVolume(o.(*corev1.PersistentVolume)) })
	s.AddTypeDefaultingFunc(&corev1.PersistentVolumeClaim{}, func(o any) { PersistentVolumeClaim(o.(*corev1.PersistentVolumeClaim)) })
}

// StorageClass defaults reclaimPolicy to Delete and volumeBindingMode to Immediate.
func StorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	}
}

// PersistentVolume defaults persistentVolumeReclaimPolicy to Retain, volumeMode to Filesystem, an
// empty status phase to Pending and a hostPath's type to "" (unset), as upstream.
func PersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if h := pv.Spec.HostPath; h != nil && h.Type == nil {
		h.Type = ptr.To(corev1.HostPathUnset)
	}
}

// PersistentVolumeClaim defaults volumeMode to Filesystem and an empty status phase to Pending.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Spec.VolumeMode == nil {
		pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
}
