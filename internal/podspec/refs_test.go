package podspec

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestVisitNames(t *testing.T) {
	envFrom := func(cm, sec string) []v1.EnvFromSource {
		return []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: sec}}}}
	}
	env := func(cm, sec string) []v1.EnvVar {
		return []v1.EnvVar{{Name: "plain", Value: "x"},
			{Name: "a", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: cm}, Key: "k"}}},
			{Name: "b", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: sec}, Key: "k"}}}}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}, {Name: ""}},
		Volumes: []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "vol-secret"}}},
			{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "vol-cm"}}}},
			{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-secret"}}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-cm"}}},
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
			{Name: "csi", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &v1.LocalObjectReference{Name: "csi-secret"}}}},
			{Name: "claim", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}},
		},
		InitContainers:      []v1.Container{{Name: "i", EnvFrom: envFrom("init-cm", "init-secret")}},
		Containers:          []v1.Container{{Name: "c", Env: env("env-cm", "env-secret")}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e", Env: env("eph-cm", "eph-secret")}}},
	}}
	var secrets, configMaps []string
	VisitSecretNames(pod, func(n string) { secrets = append(secrets, n) })
	VisitConfigMapNames(pod, func(n string) { configMaps = append(configMaps, n) })
	if want := []string{"pull", "vol-secret", "proj-secret", "csi-secret", "init-secret", "env-secret", "eph-secret"}; !slices.Equal(secrets, want) {
		t.Errorf("secrets %v, want %v", secrets, want)
	}
	if want := []string{"vol-cm", "proj-cm", "init-cm", "env-cm", "eph-cm"}; !slices.Equal(configMaps, want) {
		t.Errorf("configMaps %v, want %v", configMaps, want)
	}
}
