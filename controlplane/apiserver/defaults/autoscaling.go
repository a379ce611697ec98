package defaults

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// registerAutoscaling defaults HorizontalPodAutoscalers as kube-apiserver does
// (pkg/apis/autoscaling/v2/defaults.go; v1: minReplicas 1 only, the cpu target of 80% is set by the
// conversion to v2, package conversion).
func registerAutoscaling(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&autoscalingv1.HorizontalPodAutoscaler{}, func(o any) {
		if h := o.(*autoscalingv1.HorizontalPodAutoscaler); h.Spec.MinReplicas == nil {
			h.Spec.MinReplicas = ptr.To[int32](1)
		}
	})
	s.AddTypeDefaultingFunc(&autoscalingv2.HorizontalPodAutoscaler{}, func(o any) {
		HorizontalPodAutoscaler(o.(*autoscalingv2.HorizontalPodAutoscaler))
	})
}

// HorizontalPodAutoscaler fills minReplicas (1), the metrics (cpu at 80% average utilization when none)
// and, when behavior is set, every unset field of its scaleUp and scaleDown rules: scale up by the larger
// of 4 pods or 100% per 15 s with no stabilization window, scale down by 100% per 15 s (the scale-down
// window stays unset: the controller's default of 300 s applies).
func HorizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To[int32](1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}
	}
	if b := h.Spec.Behavior; b != nil {
		b.ScaleUp = scalingRules(b.ScaleUp, HPAScaleUpRules())
		b.ScaleDown = scalingRules(b.ScaleDown, HPAScaleDownRules())
	}
}

// HPAScaleUpRules are upstream's default scale-up rules: window 0, the larger of 4 pods or 100% per 15 s.
func HPAScaleUpRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		}}
}

// HPAScaleDownRules are upstream's default scale-down rules: 100% per 15 s, the window left unset (the
// controller's --horizontal-pod-autoscaler-downscale-stabilization, 300 s).
func HPAScaleDownRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
}

// scalingRules copies the set fields of from over def.
func scalingRules(from, def *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return def
	}
	if from.SelectPolicy != nil {
		def.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		def.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		def.Policies = from.Policies
	}
	if from.Tolerance != nil {
		def.Tolerance = from.Tolerance
	}
	return def
}
