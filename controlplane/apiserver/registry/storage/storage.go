// Package storage serves nodekit's storage API: core/v1 persistentvolumes (cluster-scoped) and
// persistentvolumeclaims (namespaced), each with /status, and storage.k8s.io/v1 storageclasses, following
// kube-apiserver's strategies: status is reset on create (phase Pending) and changed only through /status;
// a claim's spec is immutable but for binding (validation.PersistentVolumeClaimUpdate); a volume's
// source is immutable. Validation is validation.PersistentVolume, PersistentVolumeClaim and StorageClass.
package storage

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// Core returns "persistentvolumes", "persistentvolumes/status", "persistentvolumeclaims" and
// "persistentvolumeclaims/status" for core/v1.
func Core(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	pvs := store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList {
		return validation.PersistentVolume(o.(*corev1.PersistentVolume))
	})
	pvs.PrepareCreateFn = func(_ context.Context, o runtime.Object) {
		o.(*corev1.PersistentVolume).Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
	}
	pvs.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.PersistentVolumeUpdate(o.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume))
	}
	pv, pvStatus, err := store.New(getter, store.Spec{
		Resource: corev1.Resource("persistentvolumes"), Singular: "persistentvolume", ShortNames: []string{"pv"},
		NewFunc:  func() runtime.Object { return &corev1.PersistentVolume{} },
		NewList:  func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Strategy: pvs,
		StatusValidate: func(o, old runtime.Object) field.ErrorList {
			return validation.PersistentVolumeStatusUpdate(o.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume))
		},
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(o.(*corev1.PersistentVolume).Status.Phase)}
		},
		Table: volumeTable,
	})
	if err != nil {
		return nil, err
	}
	pvcs := store.NewStrategy(true, true, func(o runtime.Object) field.ErrorList {
		return validation.PersistentVolumeClaim(o.(*corev1.PersistentVolumeClaim))
	})
	pvcs.PrepareCreateFn = func(_ context.Context, o runtime.Object) {
		o.(*corev1.PersistentVolumeClaim).Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	}
	pvcs.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.PersistentVolumeClaimUpdate(o.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim))
	}
	pvc, pvcStatus, err := store.New(getter, store.Spec{
		Resource: corev1.Resource("persistentvolumeclaims"), Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"},
		NewFunc:  func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList:  func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Strategy: pvcs,
		StatusValidate: func(o, old runtime.Object) field.ErrorList {
			return validation.PersistentVolumeClaimStatusUpdate(o.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim))
		},
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(o.(*corev1.PersistentVolumeClaim).Status.Phase)}
		},
		Table: claimTable,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"persistentvolumes": pv, "persistentvolumes/status": pvStatus,
		"persistentvolumeclaims": pvc, "persistentvolumeclaims/status": pvcStatus,
	}, nil
}

// Group returns storage.k8s.io/v1 "storageclasses".
func Group(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := store.NewStrategy(false, false, func(o runtime.Object) field.ErrorList {
		return validation.StorageClass(o.(*storagev1.StorageClass))
	})
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.StorageClassUpdate(o.(*storagev1.StorageClass), old.(*storagev1.StorageClass))
	}
	sc, _, err := store.New(getter, store.Spec{
		Resource: storagev1.Resource("storageclasses"), Singular: "storageclass", ShortNames: []string{"sc"},
		NewFunc:  func() runtime.Object { return &storagev1.StorageClass{} },
		NewList:  func() runtime.Object { return &storagev1.StorageClassList{} },
		Strategy: s,
		Table:    classTable,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"storageclasses": sc}, nil
}

func col(name, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc}
}

var volumeTable = store.Table{
	Columns: []metav1.TableColumnDefinition{col("Capacity", "spec.capacity.storage"), col("Access Modes", "spec.accessModes"),
		col("Reclaim Policy", "spec.persistentVolumeReclaimPolicy"), col("Status", "status.phase"), col("Claim", "spec.claimRef"),
		col("StorageClass", "spec.storageClassName")},
	Cells: func(o runtime.Object) []any {
		pv := o.(*corev1.PersistentVolume)
		claim := ""
		if r := pv.Spec.ClaimRef; r != nil {
			claim = r.Namespace + "/" + r.Name
		}
		c := pv.Spec.Capacity[corev1.ResourceStorage]
		return []any{c.String(), accessModes(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
			string(pv.Status.Phase), claim, pv.Spec.StorageClassName}
	},
}

var claimTable = store.Table{
	Columns: []metav1.TableColumnDefinition{col("Status", "status.phase"), col("Volume", "spec.volumeName"), col("Capacity", "status.capacity.storage"),
		col("Access Modes", "status.accessModes"), col("StorageClass", "spec.storageClassName")},
	Cells: func(o runtime.Object) []any {
		pvc := o.(*corev1.PersistentVolumeClaim)
		class := ""
		if pvc.Spec.StorageClassName != nil {
			class = *pvc.Spec.StorageClassName
		}
		capacity := ""
		if c, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
			capacity = c.String()
		}
		return []any{string(pvc.Status.Phase), pvc.Spec.VolumeName, capacity, accessModes(pvc.Status.AccessModes), class}
	},
}

var classTable = store.Table{
	Columns: []metav1.TableColumnDefinition{col("Provisioner", "provisioner"), col("ReclaimPolicy", "reclaimPolicy"),
		col("VolumeBindingMode", "volumeBindingMode")},
	Cells: func(o runtime.Object) []any {
		sc := o.(*storagev1.StorageClass)
		rp, mode := "", ""
		if sc.ReclaimPolicy != nil {
			rp = string(*sc.ReclaimPolicy)
		}
		if sc.VolumeBindingMode != nil {
			mode = string(*sc.VolumeBindingMode)
		}
		return []any{sc.Provisioner, rp, mode}
	},
}

// accessModes prints modes as kubectl does (RWO, ROX, RWX, RWOP).
func accessModes(ms []corev1.PersistentVolumeAccessMode) string {
	short := map[corev1.PersistentVolumeAccessMode]string{corev1.ReadWriteOnce: "RWO", corev1.ReadOnlyMany: "ROX",
		corev1.ReadWriteMany: "RWX", corev1.ReadWriteOncePod: "RWOP"}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, short[m])
	}
	return strings.Join(out, ",")
}
