package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func goodPV() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/data"}},
	}}
}

func goodPVC() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
}

// fieldsOf lists the field paths of errs.
func fieldsOf(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return strings.Join(out, ",")
}

func TestPersistentVolume(t *testing.T) {
	if errs := PersistentVolume(goodPV()); len(errs) > 0 {
		t.Fatalf("good volume: %v", errs)
	}
	for want, mut := range map[string]func(*corev1.PersistentVolume){
		"spec.nfs": func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.NFS = nil, &corev1.NFSVolumeSource{Server: "s", Path: "/p"}
		},
		"spec.csi,spec.csi":      func(pv *corev1.PersistentVolume) { pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "d"} },
		"spec":                   func(pv *corev1.PersistentVolume) { pv.Spec.HostPath = nil },
		"spec.volumeMode":        func(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) },
		"spec.accessModes":       func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil },
		"spec.capacity[storage]": func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("0") },
		"spec.capacity[cpu]":     func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceCPU] = resource.MustParse("1") },
		"spec.hostPath.path":     func(pv *corev1.PersistentVolume) { pv.Spec.HostPath.Path = "/a/../etc" },
		"spec.persistentVolumeReclaimPolicy": func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRecycle
		},
		"spec.nodeAffinity": func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		},
		"spec.mountOptions":       func(pv *corev1.PersistentVolume) { pv.Spec.MountOptions = []string{"ro"} },
		"spec.claimRef.namespace": func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = &corev1.ObjectReference{Name: "c"} },
	} {
		pv := goodPV()
		mut(pv)
		if got := fieldsOf(PersistentVolume(pv)); got != want {
			t.Errorf("want errors on %s, got %q (%v)", want, got, PersistentVolume(pv))
		}
	}
	old, pv := goodPV(), goodPV()
	pv.Spec.HostPath.Path = "/srv/other"
	if got := fieldsOf(PersistentVolumeUpdate(pv, old)); got != "spec.persistentvolumesource" {
		t.Errorf("source change: %q", got)
	}
}

func TestPersistentVolumeClaim(t *testing.T) {
	if errs := PersistentVolumeClaim(goodPVC()); len(errs) > 0 {
		t.Fatalf("good claim: %v", errs)
	}
	for want, mut := range map[string]func(*corev1.PersistentVolumeClaim){
		"spec.volumeMode":                  func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) },
		"spec.resources.requests[storage]": func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil },
		"spec.accessModes": func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"Sometimes"}
		},
		"spec.dataSource": func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "x"}
		},
		"spec.storageClassName": func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("Bad_Name") },
	} {
		c := goodPVC()
		mut(c)
		if got := fieldsOf(PersistentVolumeClaim(c)); got != want {
			t.Errorf("want errors on %s, got %q", want, got)
		}
	}
	old, c := goodPVC(), goodPVC()
	c.Spec.VolumeName = "pv"
	if errs := PersistentVolumeClaimUpdate(c, old); len(errs) > 0 {
		t.Errorf("binding (volumeName set once): %v", errs)
	}
	again := c.DeepCopy()
	again.Spec.VolumeName = "other"
	if got := fieldsOf(PersistentVolumeClaimUpdate(again, c)); got != "spec" {
		t.Errorf("volumeName changed: %q", got)
	}
	grown := goodPVC()
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if got := fieldsOf(PersistentVolumeClaimUpdate(grown, old)); got != "spec" {
		t.Errorf("request changed: %q", got)
	}
}

func TestStorageClass(t *testing.T) {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: "nodekit.io/local-path",
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	if errs := StorageClass(sc); len(errs) > 0 {
		t.Fatalf("good class: %v", errs)
	}
	bad := sc.DeepCopy()
	bad.Provisioner, bad.AllowVolumeExpansion, bad.VolumeBindingMode = "", ptr.To(true), ptr.To(storagev1.VolumeBindingMode("Later"))
	if got := fieldsOf(StorageClass(bad)); got != "provisioner,volumeBindingMode,allowVolumeExpansion" {
		t.Errorf("bad class: %q", got)
	}
	changed := sc.DeepCopy()
	changed.ReclaimPolicy, changed.Parameters = ptr.To(corev1.PersistentVolumeReclaimRetain), map[string]string{"a": "b"}
	if got := fieldsOf(StorageClassUpdate(changed, sc)); got != "parameters,reclaimPolicy" {
		t.Errorf("immutable fields: %q", got)
	}
}
