package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/internal/podspec"
)

func ephemeralPod(ecs ...corev1.EphemeralContainer) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{
		InitContainers:      []corev1.Container{{Name: "setup", Image: "img"}},
		Containers:          []corev1.Container{{Name: "app", Image: "img"}},
		Volumes:             []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		EphemeralContainers: ecs,
	}}
	podspec.Default(&p.Spec)
	return p
}

func debugger(name string, mut func(c *corev1.EphemeralContainer)) corev1.EphemeralContainer {
	c := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox:1.36",
		ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}
	if mut != nil {
		mut(&c)
	}
	return c
}

func errPaths(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return strings.Join(out, ", ")
}

func TestPodEphemeralContainersUpdate(t *testing.T) {
	old := ephemeralPod(debugger("debugger", nil))
	one := old.Spec.EphemeralContainers[0] // as stored: defaulted
	for _, tc := range []struct {
		name string
		ecs  []corev1.EphemeralContainer
		want string // the errors' "type field", joined; "" for none
	}{
		{"add one targeting an app container", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "app" })}, ""},
		{"add one targeting an init container", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "setup" })}, ""},
		{"remove one", nil, "FieldValueForbidden spec.ephemeralContainers"},
		{"change one", []corev1.EphemeralContainer{debugger("debugger", func(c *corev1.EphemeralContainer) { c.Image = "other" })}, "FieldValueForbidden spec.ephemeralContainers"},
		{"name of an app container", []corev1.EphemeralContainer{one, debugger("app", nil)}, "FieldValueDuplicate spec.ephemeralContainers[1].name"},
		{"name of an init container", []corev1.EphemeralContainer{one, debugger("setup", nil)}, "FieldValueDuplicate spec.ephemeralContainers[1].name"},
		{"two of one name", []corev1.EphemeralContainer{one, debugger("d2", nil), debugger("d2", nil)}, "FieldValueDuplicate spec.ephemeralContainers[2].name"},
		{"unknown target", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "nope" })}, "FieldValueNotFound spec.ephemeralContainers[1].targetContainerName"},
		{"target another ephemeral container", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "debugger" })}, "FieldValueNotFound spec.ephemeralContainers[1].targetContainerName"},
		{"ports", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) {
			c.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		})}, "FieldValueForbidden spec.ephemeralContainers[1].ports"},
		{"probe, lifecycle, resources, restartPolicy", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) {
			c.ReadinessProbe = &corev1.Probe{}
			c.Lifecycle = &corev1.Lifecycle{}
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			c.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
		})}, "FieldValueForbidden spec.ephemeralContainers[1].readinessProbe, FieldValueForbidden spec.ephemeralContainers[1].lifecycle, " +
			"FieldValueForbidden spec.ephemeralContainers[1].resources, FieldValueForbidden spec.ephemeralContainers[1].restartPolicy"},
		{"subPath mount", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "x"}}
		})}, "FieldValueForbidden spec.ephemeralContainers[1].volumeMounts[0].subPath"},
		{"mount of an unknown volume", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/d"}}
		})}, "FieldValueNotFound spec.ephemeralContainers[1].volumeMounts[0].name"},
		{"no image", []corev1.EphemeralContainer{one, debugger("d2", func(c *corev1.EphemeralContainer) { c.Image = "" })}, "FieldValueRequired spec.ephemeralContainers[1].image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := old.DeepCopy()
			p.Spec.EphemeralContainers = tc.ecs
			if got := errPaths(PodEphemeralContainersUpdate(p, old)); got != tc.want {
				t.Errorf("errors %q, want %q", got, tc.want)
			}
		})
	}
	// upstream's messages
	p := old.DeepCopy()
	p.Spec.EphemeralContainers = nil
	if errs := PodEphemeralContainersUpdate(p, old); len(errs) != 1 || !strings.Contains(errs[0].Error(), `existing ephemeral containers "debugger" may not be removed`) {
		t.Errorf("removal: %v", errs)
	}
	p = old.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, debugger("d2", func(c *corev1.EphemeralContainer) { c.Ports = []corev1.ContainerPort{{ContainerPort: 80}} }))
	if errs := PodEphemeralContainersUpdate(p, old); len(errs) != 1 || errs[0].Error() != "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container" {
		t.Errorf("ports: %v", errs)
	}
	mirror := old.DeepCopy()
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	if errs := PodEphemeralContainersUpdate(mirror, mirror); len(errs) != 1 || !strings.Contains(errs[0].Error(), "static pods do not support ephemeral containers") {
		t.Errorf("mirror pod: %v", errs)
	}
}

func TestPodEphemeralContainersOnCreateAndUpdate(t *testing.T) {
	p := ephemeralPod(debugger("debugger", nil))
	if got := errPaths(PodCreate(p)); got != "FieldValueForbidden spec.ephemeralContainers" {
		t.Errorf("create with ephemeral containers: %q", got)
	}
	old := ephemeralPod()
	if got := errPaths(PodUpdate(p, old)); got != "FieldValueForbidden spec" {
		t.Errorf("adding one through the pod itself: %q", got)
	}
	if got := errPaths(PodCreate(old)); got != "" {
		t.Errorf("create without: %q", got)
	}
}
