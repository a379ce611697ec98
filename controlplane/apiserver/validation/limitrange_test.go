package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLimitRange(t *testing.T) {
	q := resource.MustParse
	l := func(kv ...string) corev1.ResourceList {
		r := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			r[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return r
	}
	for _, c := range []struct {
		name  string
		items []corev1.LimitRangeItem
		want  string // "" = valid; else a substring of the errors
	}{
		{"full container", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Min: l("cpu", "100m"), DefaultRequest: l("cpu", "200m"),
			Default: l("cpu", "500m"), Max: l("cpu", "1"), MaxLimitRequestRatio: l("cpu", "5")}}, ""},
		{"pod and pvc", []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Max: l("memory", "1Gi")},
			{Type: corev1.LimitTypePersistentVolumeClaim, Min: l("storage", "1Gi")}}, ""},
		{"extended", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: l("example.com/gpu", "1")}}, ""},
		{"unknown type", []corev1.LimitRangeItem{{Type: "Node"}}, `spec.limits[0].type: Unsupported value: "Node"`},
		{"duplicate type", []corev1.LimitRangeItem{{Type: corev1.LimitTypePod}, {Type: corev1.LimitTypePod}}, "spec.limits[1].type: Duplicate value"},
		{"bad resource", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: l("pods", "1")}}, "spec.limits[0].max[pods]: Invalid value: \"pods\": must be a standard resource for containers"},
		{"kubernetes.io resource", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: l("kubernetes.io/foo", "1")}}, "doesn't follow extended resource name standard"},
		{"pvc cpu", []corev1.LimitRangeItem{{Type: corev1.LimitTypePersistentVolumeClaim, Min: l("storage", "1Gi", "cpu", "1")}}, "spec.limits[0].min[cpu]: Unsupported value"},
		{"pvc needs storage", []corev1.LimitRangeItem{{Type: corev1.LimitTypePersistentVolumeClaim}}, "spec.limits[0].limits: Required value"},
		{"pod default", []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, DefaultRequest: l("cpu", "1")}}, "spec.limits[0].defaultRequest: Forbidden: may not be specified when `type` is 'Pod'"},
		{"min>max", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Min: l("cpu", "2"), Max: l("cpu", "1")}}, "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1"},
		{"min>defaultRequest", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Min: l("cpu", "2"), DefaultRequest: l("cpu", "1")}}, "min value 2 is greater than default request value 1"},
		{"defaultRequest>default", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: l("cpu", "1"), DefaultRequest: l("cpu", "2")}}, "default request value 2 is greater than default limit value 1"},
		{"default>max", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: l("memory", "2Gi"), Max: l("memory", "1Gi")}}, "spec.limits[0].default[memory]"},
		{"ratio<1", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: l("cpu", "500m")}}, "ratio 500m is less than 1"},
		{"ratio>max/min", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Min: l("cpu", "1"), Max: l("cpu", "2"), MaxLimitRequestRatio: l("cpu", "3")}}, "ratio 3 is greater than max/min = 2.000000"},
		{"hugepages no overcommit", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: l("hugepages-2Mi", "4Mi"), DefaultRequest: l("hugepages-2Mi", "2Mi")}}, "must equal to defaultRequest value"},
	} {
		errs := LimitRange(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: c.items}})
		got := errs.ToAggregate()
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %v, want valid", c.name, got)
		case c.want != "" && (got == nil || !strings.Contains(got.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, got, c.want)
		}
	}
}
