package autoscaling

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestTargets(t *testing.T) {
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu",
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}
	mem := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "memory",
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100Mi"))}}}
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}
	cpuNow := autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: "cpu",
		Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](199)}}}
	for _, tc := range []struct {
		specs    []autoscalingv2.MetricSpec
		statuses []autoscalingv2.MetricStatus
		want     string
	}{
		{nil, nil, "<none>"},
		{[]autoscalingv2.MetricSpec{cpu}, nil, "cpu: <unknown>/50%"},
		{[]autoscalingv2.MetricSpec{cpu}, []autoscalingv2.MetricStatus{cpuNow}, "cpu: 199%/50%"},
		{[]autoscalingv2.MetricSpec{cpu, mem}, []autoscalingv2.MetricStatus{cpuNow}, "cpu: 199%/50%, memory: <unknown>/100Mi"},
		{[]autoscalingv2.MetricSpec{cpu, mem, pods}, nil, "cpu: <unknown>/50%, memory: <unknown>/100Mi + 1 more..."},
		{[]autoscalingv2.MetricSpec{pods}, nil, "<unknown>/10"},
	} {
		if got := Targets(tc.specs, tc.statuses); got != tc.want {
			t.Errorf("Targets = %q, want %q", got, tc.want)
		}
	}
}
