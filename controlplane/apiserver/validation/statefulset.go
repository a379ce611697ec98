package validation

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StatefulSet validates an apps/v1 StatefulSet as upstream ValidateStatefulSet does for the fields
// nodekit serves: the name a DNS-1123 label (pods are named <set>-<ordinal> and use it as hostname);
// podManagementPolicy OrderedReady or Parallel; updateStrategy RollingUpdate (partition >= 0,
// maxUnavailable a positive integer or a percentage of at most 100%) or OnDelete (without
// rollingUpdate); replicas, minReadySeconds, revisionHistoryLimit and ordinals.start non-negative;
// serviceName a DNS-1123 label when set; the selector matching the template's labels; a template with
// restartPolicy Always and no activeDeadlineSeconds.
//
// Each volumeClaimTemplate is a claim spec (PersistentVolumeClaimSpec) under a DNS-label name, unique,
// and its name is a volume the template's containers may mount (the controller adds it to each pod);
// persistentVolumeClaimRetentionPolicy is Retain or Delete.
func StatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	errs := Name(&ss.ObjectMeta, apivalidation.NameIsDNSLabel)
	s := &ss.Spec
	switch s.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(specPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("podManagementPolicy"), s.PodManagementPolicy,
			[]string{string(appsv1.OrderedReadyPodManagement), string(appsv1.ParallelPodManagement)}))
	}
	errs = append(errs, statefulSetUpdateStrategy(s.UpdateStrategy, specPath.Child("updateStrategy"))...)
	names := map[string]bool{}
	for i := range s.VolumeClaimTemplates {
		t := &s.VolumeClaimTemplates[i]
		tp := specPath.Child("volumeClaimTemplates").Index(i)
		for _, msg := range apivalidation.NameIsDNSLabel(t.Name, false) {
			errs = append(errs, field.Invalid(tp.Child("metadata", "name"), t.Name, msg))
		}
		if names[t.Name] {
			errs = append(errs, field.Duplicate(tp.Child("metadata", "name"), t.Name))
		}
		names[t.Name] = true
		errs = append(errs, PersistentVolumeClaimSpec(&t.Spec, tp.Child("spec"))...)
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p != nil {
		pp := specPath.Child("persistentVolumeClaimRetentionPolicy")
		for _, v := range []struct {
			name string
			val  appsv1.PersistentVolumeClaimRetentionPolicyType
		}{{"whenDeleted", p.WhenDeleted}, {"whenScaled", p.WhenScaled}} {
			switch v.val {
			case "", appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
			default:
				errs = append(errs, field.NotSupported(pp.Child(v.name), v.val, []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType),
					string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}))
			}
		}
	}
	for _, v := range []struct {
		path *field.Path
		val  *int32
	}{{specPath.Child("minReadySeconds"), &s.MinReadySeconds}, {specPath.Child("revisionHistoryLimit"), s.RevisionHistoryLimit}} {
		if v.val != nil && *v.val < 0 {
			errs = append(errs, field.Invalid(v.path, *v.val, "must be greater than or equal to 0"))
		}
	}
	if s.Ordinals != nil && s.Ordinals.Start < 0 {
		errs = append(errs, field.Invalid(specPath.Child("ordinals", "start"), s.Ordinals.Start, "must be greater than or equal to 0"))
	}
	if s.ServiceName != "" {
		for _, msg := range validation.IsDNS1123Label(s.ServiceName) {
			errs = append(errs, field.Invalid(specPath.Child("serviceName"), s.ServiceName, msg))
		}
	}
	tmpl := &s.Template
	if len(s.VolumeClaimTemplates) > 0 {
		// the pods get a volume per template (replacing a template volume of the same name)
		tmpl = tmpl.DeepCopy()
		for _, t := range s.VolumeClaimTemplates {
			if !slices.ContainsFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == t.Name }) {
				tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: t.Name}}})
			}
		}
	}
	errs = append(errs, workload(s.Replicas, s.Selector, tmpl)...)
	tp := specPath.Child("template", "spec")
	if s.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tp.Child("restartPolicy"), s.Template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tp.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in StatefulSet is not Supported"))
	}
	return errs
}

func statefulSetUpdateStrategy(st appsv1.StatefulSetUpdateStrategy, p *field.Path) field.ErrorList {
	rp := p.Child("rollingUpdate")
	switch st.Type {
	case "":
		return field.ErrorList{field.Required(p.Child("type"), "")}
	case appsv1.OnDeleteStatefulSetStrategyType:
		if st.RollingUpdate != nil {
			return field.ErrorList{field.Invalid(rp, st.RollingUpdate, "only allowed for updateStrategy 'RollingUpdate'")}
		}
		return nil
	case appsv1.RollingUpdateStatefulSetStrategyType:
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), st.Type,
			[]string{string(appsv1.RollingUpdateStatefulSetStrategyType), string(appsv1.OnDeleteStatefulSetStrategyType)})}
	}
	ru := st.RollingUpdate
	if ru == nil {
		return nil
	}
	var errs field.ErrorList
	if ru.Partition != nil && *ru.Partition < 0 {
		errs = append(errs, field.Invalid(rp.Child("partition"), *ru.Partition, "must be greater than or equal to 0"))
	}
	if ru.MaxUnavailable != nil {
		fp := rp.Child("maxUnavailable")
		n, isPercent, err := intOrPercent(ru.MaxUnavailable, fp)
		switch {
		case err != nil:
			errs = append(errs, err)
		case n < 0:
			errs = append(errs, field.Invalid(fp, ru.MaxUnavailable.String(), "must be greater than or equal to 0"))
		case n == 0:
			errs = append(errs, field.Invalid(fp, ru.MaxUnavailable.String(), "cannot be 0"))
		case isPercent && n > 100:
			errs = append(errs, field.Invalid(fp, ru.MaxUnavailable.String(), "must not be greater than 100%"))
		}
	}
	return errs
}

// StatefulSetUpdate checks the fields upstream makes immutable: selector, volumeClaimTemplates,
// serviceName and podManagementPolicy.
func StatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	errs := WorkloadUpdate(ss.Spec.Selector, old.Spec.Selector)
	errs = append(errs, apivalidation.ValidateImmutableField(ss.Spec.VolumeClaimTemplates, old.Spec.VolumeClaimTemplates, specPath.Child("volumeClaimTemplates"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(ss.Spec.ServiceName, old.Spec.ServiceName, specPath.Child("serviceName"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(ss.Spec.PodManagementPolicy, old.Spec.PodManagementPolicy, specPath.Child("podManagementPolicy"))...)
	return errs
}
