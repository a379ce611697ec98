package validation

import (
	"fmt"
	"path"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The storage kinds follow k8s.io/kubernetes pkg/apis/core/validation (ValidatePersistentVolume,
// ValidatePersistentVolumeClaim and their updates) and pkg/apis/storage/validation (StorageClass),
// narrowed to what nodekit acts on: Filesystem volumes from a hostPath or local source. Anything nodekit
// would store without acting on (Block mode, network or cloud sources, Recycle, expansion, data sources,
// volume attributes classes, mount options, allowed topologies) is refused with 422 naming the field.

var accessModes = sets.New(string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod))

const unsupportedByNodekit = "not supported by nodekit"

// StorageClass validates a storage.k8s.io/v1 StorageClass: provisioner (a qualified name), reclaimPolicy
// (Delete or Retain), volumeBindingMode (Immediate or WaitForFirstConsumer); allowVolumeExpansion,
// mountOptions and allowedTopologies are refused (nodekit neither expands nor mounts with options nor
// restricts topology).
func StorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := Subdomain(&sc.ObjectMeta)
	pp := field.NewPath("provisioner")
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(pp, ""))
	} else {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(sc.Provisioner)) {
			errs = append(errs, field.Invalid(pp, sc.Provisioner, msg))
		}
	}
	for k := range sc.Parameters {
		if k == "" {
			errs = append(errs, field.Invalid(field.NewPath("parameters"), k, "parameter names must not be empty"))
		}
	}
	if sc.ReclaimPolicy != nil {
		errs = append(errs, reclaimPolicy(*sc.ReclaimPolicy, field.NewPath("reclaimPolicy"))...)
	}
	if m := sc.VolumeBindingMode; m != nil && *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer {
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *m,
			[]string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}))
	}
	if sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion {
		errs = append(errs, field.Forbidden(field.NewPath("allowVolumeExpansion"), "volume expansion is "+unsupportedByNodekit))
	}
	if len(sc.MountOptions) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("mountOptions"), "mount options are "+unsupportedByNodekit))
	}
	if len(sc.AllowedTopologies) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("allowedTopologies"), "allowed topologies are "+unsupportedByNodekit))
	}
	return errs
}

// StorageClassUpdate validates sc and keeps parameters, provisioner, reclaimPolicy and
// volumeBindingMode as they were (upstream: "updates to ... are forbidden").
func StorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	errs := StorageClass(sc)
	if !apiequality.Semantic.DeepEqual(sc.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(sc.ReclaimPolicy, old.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return errs
}

func reclaimPolicy(p corev1.PersistentVolumeReclaimPolicy, fp *field.Path) field.ErrorList {
	switch p {
	case corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimRecycle:
		return field.ErrorList{field.Forbidden(fp, "the Recycle reclaim policy is deprecated upstream and "+unsupportedByNodekit)}
	}
	return field.ErrorList{field.NotSupported(fp, p, []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)})}
}

func modes(ms []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ms) == 0 {
		return field.ErrorList{field.Required(p, "at least 1 access mode is required")}
	}
	for _, m := range ms {
		if !accessModes.Has(string(m)) {
			errs = append(errs, field.NotSupported(p, m, sets.List(accessModes)))
		}
		if m == corev1.ReadWriteOncePod && len(ms) > 1 {
			errs = append(errs, field.Forbidden(p, "may not use ReadWriteOncePod with other access modes"))
		}
	}
	return errs
}

func filesystemMode(m *corev1.PersistentVolumeMode, p *field.Path) field.ErrorList {
	if m == nil || *m == corev1.PersistentVolumeFilesystem {
		return nil
	}
	if *m == corev1.PersistentVolumeBlock {
		return field.ErrorList{field.Forbidden(p, "raw Block volumes are "+unsupportedByNodekit+" (only Filesystem)")}
	}
	return field.ErrorList{field.NotSupported(p, *m, []string{string(corev1.PersistentVolumeFilesystem)})}
}

// storageQuantity checks that list holds exactly one resource, storage, with a positive value.
func storageQuantity(list corev1.ResourceList, p *field.Path, required bool) field.ErrorList {
	var errs field.ErrorList
	q, ok := list[corev1.ResourceStorage]
	if !ok && required {
		errs = append(errs, field.Required(p.Key(string(corev1.ResourceStorage)), ""))
	}
	if ok && q.Cmp(resource.Quantity{}) <= 0 {
		errs = append(errs, field.Invalid(p.Key(string(corev1.ResourceStorage)), q.String(), "must be greater than zero"))
	}
	for name := range list {
		if name != corev1.ResourceStorage {
			errs = append(errs, field.NotSupported(p.Key(string(name)), name, []string{string(corev1.ResourceStorage)}))
		}
	}
	return errs
}

// volumeSourceFields returns the JSON names of the set fields of a PersistentVolumeSource.
func volumeSourceFields(src *corev1.PersistentVolumeSource) []string {
	var set []string
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			set = append(set, strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return set
}

func hostPathType(t *corev1.HostPathType, p *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	valid := []string{"", string(corev1.HostPathDirectoryOrCreate), string(corev1.HostPathDirectory), string(corev1.HostPathFileOrCreate),
		string(corev1.HostPathFile), string(corev1.HostPathSocket), string(corev1.HostPathCharDev), string(corev1.HostPathBlockDev)}
	for _, v := range valid {
		if string(*t) == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, *t, valid)}
}

// volumePath checks a hostPath or local path: set, absolute, and without ".." elements.
func volumePath(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if !path.IsAbs(s) {
		return field.ErrorList{field.Invalid(p, s, "must be an absolute path")}
	}
	for _, e := range strings.Split(s, "/") {
		if e == ".." {
			return field.ErrorList{field.Invalid(p, s, "must not contain '..'")}
		}
	}
	return nil
}

// PersistentVolume validates a core/v1 PersistentVolume: name, accessModes, capacity (storage only, > 0),
// exactly one source and that one hostPath or local (a local volume needs spec.nodeAffinity), volumeMode
// Filesystem, reclaim policy, claimRef, storageClassName and nodeAffinity.
func PersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	errs := Subdomain(&pv.ObjectMeta)
	errs = append(errs, modes(pv.Spec.AccessModes, specPath.Child("accessModes"))...)
	if len(pv.Spec.Capacity) == 0 {
		errs = append(errs, field.Required(specPath.Child("capacity"), ""))
	} else {
		errs = append(errs, storageQuantity(pv.Spec.Capacity, specPath.Child("capacity"), true)...)
	}
	errs = append(errs, reclaimPolicy(pv.Spec.PersistentVolumeReclaimPolicy, specPath.Child("persistentVolumeReclaimPolicy"))...)
	errs = append(errs, filesystemMode(pv.Spec.VolumeMode, specPath.Child("volumeMode"))...)
	set := volumeSourceFields(&pv.Spec.PersistentVolumeSource)
	switch {
	case len(set) == 0:
		errs = append(errs, field.Required(specPath, "must specify a volume type (nodekit supports hostPath and local)"))
	case len(set) > 1:
		errs = append(errs, field.Forbidden(specPath.Child(set[1]), "may not specify more than 1 volume type"))
	}
	for _, name := range set {
		if name != "hostPath" && name != "local" {
			errs = append(errs, field.Forbidden(specPath.Child(name), "volume type "+name+" is "+unsupportedByNodekit+" (supported: hostPath, local)"))
		}
	}
	if h := pv.Spec.HostPath; h != nil {
		errs = append(errs, volumePath(h.Path, specPath.Child("hostPath", "path"))...)
		errs = append(errs, hostPathType(h.Type, specPath.Child("hostPath", "type"))...)
		if path.Clean(h.Path) == "/" && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			errs = append(errs, field.Forbidden(specPath.Child("persistentVolumeReclaimPolicy"), "may not be 'Delete' for a hostPath volume of '/'"))
		}
	}
	if l := pv.Spec.Local; l != nil {
		errs = append(errs, volumePath(l.Path, specPath.Child("local", "path"))...)
		if l.FSType != nil && *l.FSType != "" {
			errs = append(errs, field.Forbidden(specPath.Child("local", "fsType"), "fsType (a block device to format) is "+unsupportedByNodekit))
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			errs = append(errs, field.Required(specPath.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
	}
	if a := pv.Spec.NodeAffinity; a != nil {
		if a.Required == nil {
			errs = append(errs, field.Required(specPath.Child("nodeAffinity", "required"), "must specify required node constraints"))
		} else {
			rp := specPath.Child("nodeAffinity", "required")
			errs = append(errs, nodeSelector(a.Required, rp)...)
			for i, t := range a.Required.NodeSelectorTerms {
				if len(t.MatchFields) > 0 {
					errs = append(errs, field.Forbidden(rp.Child("nodeSelectorTerms").Index(i).Child("matchFields"),
						"matchFields in a volume's node affinity are "+unsupportedByNodekit))
				}
			}
		}
	}
	if r := pv.Spec.ClaimRef; r != nil {
		if r.Name == "" {
			errs = append(errs, field.Required(specPath.Child("claimRef", "name"), ""))
		}
		if r.Namespace == "" {
			errs = append(errs, field.Required(specPath.Child("claimRef", "namespace"), ""))
		}
	}
	if pv.Spec.StorageClassName != "" {
		errs = append(errs, subdomainField(pv.Spec.StorageClassName, specPath.Child("storageClassName"))...)
	}
	if len(pv.Spec.MountOptions) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("mountOptions"), "may not specify mount options for this volume type"))
	}
	if pv.Spec.VolumeAttributesClassName != nil {
		errs = append(errs, field.Forbidden(specPath.Child("volumeAttributesClassName"), "volume attributes classes are "+unsupportedByNodekit))
	}
	return errs
}

// PersistentVolumeUpdate validates pv and keeps its source, volumeMode and nodeAffinity as they were.
func PersistentVolumeUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := PersistentVolume(pv)
	if !apiequality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(specPath.Child("persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.VolumeMode, old.Spec.VolumeMode, specPath.Child("volumeMode"))...)
	if old.Spec.NodeAffinity != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.NodeAffinity, old.Spec.NodeAffinity, specPath.Child("nodeAffinity"))...)
	}
	return errs
}

var (
	volumePhases = []string{string(corev1.VolumePending), string(corev1.VolumeAvailable), string(corev1.VolumeBound),
		string(corev1.VolumeReleased), string(corev1.VolumeFailed)}
	claimPhases = []string{string(corev1.ClaimPending), string(corev1.ClaimBound), string(corev1.ClaimLost)}
)

// PersistentVolumeStatusUpdate checks status.phase.
func PersistentVolumeStatusUpdate(pv, _ *corev1.PersistentVolume) field.ErrorList {
	return phase(string(pv.Status.Phase), volumePhases)
}

func phase(p string, valid []string) field.ErrorList {
	for _, v := range valid {
		if p == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(field.NewPath("status", "phase"), p, valid)}
}

func subdomainField(s string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(s) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}

// PersistentVolumeClaim validates a PersistentVolumeClaim's metadata and spec.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	return append(Subdomain(&pvc.ObjectMeta), PersistentVolumeClaimSpec(&pvc.Spec, specPath)...)
}

// PersistentVolumeClaimSpec validates a claim's spec at p (a claim's, or a StatefulSet
// volumeClaimTemplate's): accessModes, resources (storage only: requests.storage required and > 0),
// selector, storageClassName, volumeName, volumeMode Filesystem; dataSource, dataSourceRef and
// volumeAttributesClassName are refused (nodekit neither clones nor populates volumes).
func PersistentVolumeClaimSpec(s *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	errs := modes(s.AccessModes, p.Child("accessModes"))
	errs = append(errs, storageQuantity(s.Resources.Requests, p.Child("resources", "requests"), true)...)
	errs = append(errs, storageQuantity(s.Resources.Limits, p.Child("resources", "limits"), false)...)
	if r, l := s.Resources.Requests[corev1.ResourceStorage], s.Resources.Limits[corev1.ResourceStorage]; !l.IsZero() && r.Cmp(l) > 0 {
		errs = append(errs, field.Invalid(p.Child("resources", "requests").Key(string(corev1.ResourceStorage)), r.String(),
			fmt.Sprintf("must be less than or equal to storage limit of %s", l.String())))
	}
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	if s.StorageClassName != nil && *s.StorageClassName != "" {
		errs = append(errs, subdomainField(*s.StorageClassName, p.Child("storageClassName"))...)
	}
	if s.VolumeName != "" {
		errs = append(errs, subdomainField(s.VolumeName, p.Child("volumeName"))...)
	}
	errs = append(errs, filesystemMode(s.VolumeMode, p.Child("volumeMode"))...)
	if s.DataSource != nil {
		errs = append(errs, field.Forbidden(p.Child("dataSource"), "volume data sources (clones, snapshots) are "+unsupportedByNodekit))
	}
	if s.DataSourceRef != nil {
		errs = append(errs, field.Forbidden(p.Child("dataSourceRef"), "volume populators are "+unsupportedByNodekit))
	}
	if s.VolumeAttributesClassName != nil {
		errs = append(errs, field.Forbidden(p.Child("volumeAttributesClassName"), "volume attributes classes are "+unsupportedByNodekit))
	}
	return errs
}

// PersistentVolumeClaimUpdate validates pvc and enforces upstream's immutability: the spec does not
// change after creation, except that spec.volumeName may be set once while it is empty (binding).
// nodekit does not expand volumes, so resources.requests is immutable too.
func PersistentVolumeClaimUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := PersistentVolumeClaim(pvc)
	oldSpec := old.Spec.DeepCopy()
	if oldSpec.VolumeName == "" {
		oldSpec.VolumeName = pvc.Spec.VolumeName
	}
	if !apiequality.Semantic.DeepEqual(&pvc.Spec, oldSpec) {
		errs = append(errs, field.Forbidden(specPath, "spec is immutable after creation except spec.volumeName while it is unset (nodekit does not expand volumes)"))
	}
	return errs
}

// PersistentVolumeClaimStatusUpdate checks status.phase and that capacity holds storage only.
func PersistentVolumeClaimStatusUpdate(pvc, _ *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := phase(string(pvc.Status.Phase), claimPhases)
	errs = append(errs, modesOrEmpty(pvc.Status.AccessModes, field.NewPath("status", "accessModes"))...)
	return append(errs, storageQuantity(pvc.Status.Capacity, field.NewPath("status", "capacity"), false)...)
}

func modesOrEmpty(ms []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	if len(ms) == 0 {
		return nil
	}
	return modes(ms, p)
}
