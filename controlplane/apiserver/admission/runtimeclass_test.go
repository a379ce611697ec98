package admission

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestMergeTolerations: the RuntimeClass's tolerations are appended unless one already there covers
// them, and a pod toleration a class toleration covers is dropped (upstream MergeTolerations).
func TestMergeTolerations(t *testing.T) {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	equal := corev1.Toleration{Key: "a", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}
	secs := corev1.Toleration{Key: "n", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	for _, tc := range []struct {
		name               string
		pod, class, merged []corev1.Toleration
	}{
		{"appended", []corev1.Toleration{exists("a", "")}, []corev1.Toleration{exists("b", corev1.TaintEffectNoSchedule)},
			[]corev1.Toleration{exists("a", ""), exists("b", corev1.TaintEffectNoSchedule)}},
		{"covered by the pod's", []corev1.Toleration{exists("a", "")}, []corev1.Toleration{equal}, []corev1.Toleration{exists("a", "")}},
		{"pod's covered by the class's", []corev1.Toleration{equal}, []corev1.Toleration{exists("a", corev1.TaintEffectNoSchedule)},
			[]corev1.Toleration{exists("a", corev1.TaintEffectNoSchedule)}},
		{"duplicate", []corev1.Toleration{secs}, []corev1.Toleration{secs}, []corev1.Toleration{secs}},
		{"shorter tolerationSeconds kept apart", []corev1.Toleration{secs}, []corev1.Toleration{exists("n", corev1.TaintEffectNoExecute)},
			[]corev1.Toleration{exists("n", corev1.TaintEffectNoExecute)}},
	} {
		if got := mergeTolerations(tc.pod, tc.class); !reflect.DeepEqual(got, tc.merged) {
			t.Errorf("%s: merged %v, want %v", tc.name, got, tc.merged)
		}
	}
}
