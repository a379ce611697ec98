package defaults

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// TestHorizontalPodAutoscaler: minReplicas 1 and cpu at 80% when unset; a set behavior gets upstream's
// rules in every unset field, the scale-down window left unset (the controller's 300 s); set fields
// stay.
func TestHorizontalPodAutoscaler(t *testing.T) {
	h := &autoscalingv2.HorizontalPodAutoscaler{}
	HorizontalPodAutoscaler(h)
	if *h.Spec.MinReplicas != 1 || len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Resource.Name != "cpu" ||
		*h.Spec.Metrics[0].Resource.Target.AverageUtilization != 80 || h.Spec.Behavior != nil {
		t.Fatalf("defaults %+v", h.Spec)
	}
	h = &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2),
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}}}
	HorizontalPodAutoscaler(h)
	up, down := h.Spec.Behavior.ScaleUp, h.Spec.Behavior.ScaleDown
	if *h.Spec.MinReplicas != 2 || *up.StabilizationWindowSeconds != 0 || *up.SelectPolicy != autoscalingv2.MaxChangePolicySelect || len(up.Policies) != 2 ||
		up.Policies[0] != (autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}) ||
		up.Policies[1] != (autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}) {
		t.Fatalf("scaleUp %+v", up)
	}
	if *down.StabilizationWindowSeconds != 60 || *down.SelectPolicy != autoscalingv2.MaxChangePolicySelect || len(down.Policies) != 1 ||
		down.Policies[0] != (autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}) {
		t.Fatalf("scaleDown %+v", down)
	}
	h = &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{}}}
	HorizontalPodAutoscaler(h)
	if h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != nil {
		t.Fatalf("scale-down window defaulted to %d, want unset", *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds)
	}
}

// TestHorizontalPodAutoscalerV1: v1 defaults minReplicas only; the cpu target stays unset (the
// conversion to v2 puts in the 80%).
func TestHorizontalPodAutoscalerV1(t *testing.T) {
	s := runtime.NewScheme()
	Register(s)
	h := &autoscalingv1.HorizontalPodAutoscaler{}
	s.Default(h)
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != 1 || h.Spec.TargetCPUUtilizationPercentage != nil {
		t.Fatalf("v1 defaults %+v", h.Spec)
	}
	h = &autoscalingv1.HorizontalPodAutoscaler{Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](3)}}
	s.Default(h)
	if *h.Spec.MinReplicas != 3 {
		t.Fatalf("set minReplicas changed: %d", *h.Spec.MinReplicas)
	}
}
