package validation

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func validHPA() *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		}}
}

func TestHorizontalPodAutoscaler(t *testing.T) {
	if errs := HorizontalPodAutoscaler(validHPA(), nil); len(errs) != 0 {
		t.Fatalf("valid: %v", errs)
	}
	rc := validHPA()
	rc.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "ReplicationController", Name: "rc"}
	if errs := HorizontalPodAutoscaler(rc, nil); len(errs) != 0 {
		t.Fatalf("ReplicationController in v1: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*autoscalingv2.HorizontalPodAutoscaler)
		want   string
	}{
		{"minReplicas 0", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To[int32](0) },
			"spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"},
		{"maxReplicas unset", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 0 },
			"spec.maxReplicas: Required value: must be set and greater than 0"},
		{"max below min", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To[int32](6) },
			"spec.maxReplicas: Invalid value: 5: must be greater than or equal to `minReplicas`"},
		{"target without group", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.APIVersion = "v1" },
			`spec.scaleTargetRef.apiVersion: Invalid value: "v1": apiVersion must specify API group`},
		{"target without kind", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Kind = "" },
			"spec.scaleTargetRef.kind: Required value"},
		{"unknown metric type", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics[0].Type = "Bogus" },
			`spec.metrics[0].type: Unsupported value: "Bogus"`},
		{"two sources", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))}}
		}, "spec.metrics[0].pods: Forbidden: must populate the given metric source only"},
		{"utilization and value", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target.AverageValue = ptr.To(resource.MustParse("100m"))
		}, "spec.metrics[0].resource.target.averageValue: Forbidden: may not set both a target raw value and a target utilization"},
		{"utilization 0", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target.AverageUtilization = ptr.To[int32](0)
		},
			"spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"},
		{"window too long", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3601),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 15}}}}
		}, "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600"},
		{"policy period", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 10, PeriodSeconds: 1801}}}}
		}, "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800"},
		{"no policies", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{}}
		}, "spec.behavior.scaleUp.policies: Required value: must specify at least one Policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHPA()
			tc.mutate(h)
			errs := HorizontalPodAutoscaler(h, nil)
			if len(errs) == 0 || !strings.HasPrefix(errs[0].Error(), tc.want) {
				t.Fatalf("errs = %v, want %q first", errs, tc.want)
			}
		})
	}
	// minReplicas 0 stays allowed on an object that already has it
	old := validHPA()
	old.Spec.MinReplicas = ptr.To[int32](0)
	old.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("5"))}}}}
	if errs := HorizontalPodAutoscaler(old.DeepCopy(), old); len(errs) != 0 {
		t.Fatalf("update keeping minReplicas 0: %v", errs)
	}
}
