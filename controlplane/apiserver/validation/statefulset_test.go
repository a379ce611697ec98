package validation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/controlplane/apiserver/defaults"
)

func validSet() *appsv1.StatefulSet {
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
	defaults.StatefulSet(ss)
	return ss
}

// TestStatefulSetDefaults: upstream 1.37's defaults.
func TestStatefulSetDefaults(t *testing.T) {
	s := validSet().Spec
	ru := s.UpdateStrategy.RollingUpdate
	if s.PodManagementPolicy != appsv1.OrderedReadyPodManagement || s.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType ||
		ru == nil || *ru.Partition != 0 || ru.MaxUnavailable.IntValue() != 1 || *s.Replicas != 1 || *s.RevisionHistoryLimit != 10 ||
		s.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
		s.PersistentVolumeClaimRetentionPolicy.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
		s.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Fatalf("defaults: %+v", s)
	}
}

// TestStatefulSetValidation: each bad field is refused with its path; the
// volumeClaimTemplates' claim specs are validated as claims (a Block template is refused).
func TestStatefulSetValidation(t *testing.T) {
	if errs := StatefulSet(validSet()); len(errs) != 0 {
		t.Fatalf("valid set refused: %v", errs)
	}
	for _, tc := range []struct {
		path string
		typ  field.ErrorType
		edit func(*appsv1.StatefulSet)
	}{
		{"metadata.name", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Name = "web.a" }},
		{"spec.template.metadata.labels", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.Template.Labels = map[string]string{"app": "x"} }},
		{"spec.selector", field.ErrorTypeRequired, func(s *appsv1.StatefulSet) { s.Spec.Selector = nil }},
		{"spec.serviceName", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "Web_1" }},
		{"spec.podManagementPolicy", field.ErrorTypeNotSupported, func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Burst" }},
		{"spec.updateStrategy.type", field.ErrorTypeNotSupported, func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = "Recreate" }},
		{"spec.updateStrategy.rollingUpdate", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType }},
		{"spec.updateStrategy.rollingUpdate.partition", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](-1) }},
		{"spec.updateStrategy.rollingUpdate.maxUnavailable", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		}},
		{"spec.updateStrategy.rollingUpdate.maxUnavailable", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("150%"))
		}},
		{"spec.replicas", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](-1) }},
		{"spec.minReadySeconds", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = -1 }},
		{"spec.revisionHistoryLimit", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](-1) }},
		{"spec.ordinals.start", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1} }},
		{"spec.template.spec.restartPolicy", field.ErrorTypeNotSupported, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }},
		{"spec.template.spec.activeDeadlineSeconds", field.ErrorTypeForbidden, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) }},
		{"spec.volumeClaimTemplates[0].spec.resources.requests[storage]", field.ErrorTypeRequired, func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}
		}},
		{"spec.volumeClaimTemplates[0].spec.volumeMode", field.ErrorTypeForbidden, func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					VolumeMode: ptr.To(corev1.PersistentVolumeBlock),
					Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}}
		}},
		{"spec.volumeClaimTemplates[0].metadata.name", field.ErrorTypeInvalid, func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "Data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}}
		}},
		{"spec.persistentVolumeClaimRetentionPolicy.whenScaled", field.ErrorTypeNotSupported, func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = "Keep"
		}},
	} {
		s := validSet()
		tc.edit(s)
		if errs := StatefulSet(s); !hasCause(errs, tc.path, tc.typ) {
			t.Errorf("%s: want %s, got %v", tc.path, tc.typ, errs)
		}
	}
}

// TestStatefulSetUpdate: selector, serviceName, podManagementPolicy and volumeClaimTemplates are
// immutable; replicas, template, updateStrategy, minReadySeconds may change.
func TestStatefulSetUpdate(t *testing.T) {
	old := validSet()
	ok := validSet()
	ok.Spec.Replicas, ok.Spec.MinReadySeconds = ptr.To[int32](5), 3
	ok.Spec.Template.Spec.Containers[0].Image = "j"
	ok.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2)
	if errs := StatefulSetUpdate(ok, old); len(errs) != 0 {
		t.Fatalf("mutable changes refused: %v", errs)
	}
	for path, edit := range map[string]func(*appsv1.StatefulSet){
		"spec.selector":            func(s *appsv1.StatefulSet) { s.Spec.Selector.MatchLabels["tier"] = "x" },
		"spec.serviceName":         func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" },
		"spec.podManagementPolicy": func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement },
		"spec.volumeClaimTemplates": func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		},
	} {
		s := validSet()
		edit(s)
		if errs := StatefulSetUpdate(s, old); !hasCause(errs, path, field.ErrorTypeInvalid) {
			t.Errorf("%s: want immutable, got %v", path, errs)
		}
	}
}
