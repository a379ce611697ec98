// Package conversion holds the conversions between external versions of one kind that have different
// Go types: autoscaling/v1 HorizontalPodAutoscalers to and from autoscaling/v2, the type the API server
// stores them as (its hub). They follow kube-apiserver's pkg/apis/autoscaling/v1/conversion.go field
// by field, annotations included, so an object written through one version and read through the other
// keeps what the other version has no field for.
package conversion

import (
	"encoding/json"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Annotations an autoscaling/v1 HorizontalPodAutoscaler carries the v2 fields it has no field for in
// (upstream's names and JSON shapes): the metrics other than the cpu utilization target (a JSON list of
// v1 MetricSpecs), all current metrics (v1 MetricStatuses), the behavior (JSON keyed by the Go field
// names, as kube-apiserver writes it) and the conditions (v1 conditions).
const (
	MetricSpecsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	MetricStatusesAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	ConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	BehaviorSpecsAnnotation  = "autoscaling.alpha.kubernetes.io/behavior"
	// the scale-up and scale-down tolerance annotations are not written by v1 conversion (the
	// tolerances travel in the behavior annotation) but are dropped with the others, as upstream does
	toleranceScaleDownAnnotation = "autoscaling.alpha.kubernetes.io/scale-down-tolerance"
	toleranceScaleUpAnnotation   = "autoscaling.alpha.kubernetes.io/scale-up-tolerance"
)

// DefaultCPUUtilization is the cpu average utilization (percent) a v1 object without a target and
// without other metrics gets as its v2 metric.
const DefaultCPUUtilization = 80

var roundTripAnnotations = []string{MetricSpecsAnnotation, MetricStatusesAnnotation, ConditionsAnnotation,
	BehaviorSpecsAnnotation, toleranceScaleDownAnnotation, toleranceScaleUpAnnotation}

// RegisterAutoscaling adds the autoscaling/v1 <-> autoscaling/v2 HorizontalPodAutoscaler (and list)
// conversions to s.
func RegisterAutoscaling(s *runtime.Scheme) error {
	for _, f := range []struct {
		a, b any
		fn   conversion.ConversionFunc
	}{
		{(*autoscalingv1.HorizontalPodAutoscaler)(nil), (*autoscalingv2.HorizontalPodAutoscaler)(nil), func(a, b any, _ conversion.Scope) error {
			return HPAFromV1(a.(*autoscalingv1.HorizontalPodAutoscaler), b.(*autoscalingv2.HorizontalPodAutoscaler))
		}},
		{(*autoscalingv2.HorizontalPodAutoscaler)(nil), (*autoscalingv1.HorizontalPodAutoscaler)(nil), func(a, b any, _ conversion.Scope) error {
			return HPAToV1(a.(*autoscalingv2.HorizontalPodAutoscaler), b.(*autoscalingv1.HorizontalPodAutoscaler))
		}},
		{(*autoscalingv1.HorizontalPodAutoscalerList)(nil), (*autoscalingv2.HorizontalPodAutoscalerList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*autoscalingv1.HorizontalPodAutoscalerList), b.(*autoscalingv2.HorizontalPodAutoscalerList)
			in.ListMeta.DeepCopyInto(&out.ListMeta)
			out.Items = make([]autoscalingv2.HorizontalPodAutoscaler, len(in.Items))
			for i := range in.Items {
				if err := HPAFromV1(&in.Items[i], &out.Items[i]); err != nil {
					return err
				}
			}
			return nil
		}},
		{(*autoscalingv2.HorizontalPodAutoscalerList)(nil), (*autoscalingv1.HorizontalPodAutoscalerList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*autoscalingv2.HorizontalPodAutoscalerList), b.(*autoscalingv1.HorizontalPodAutoscalerList)
			in.ListMeta.DeepCopyInto(&out.ListMeta)
			out.Items = make([]autoscalingv1.HorizontalPodAutoscaler, len(in.Items))
			for i := range in.Items {
				if err := HPAToV1(&in.Items[i], &out.Items[i]); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		if err := s.AddConversionFunc(f.a, f.b, f.fn); err != nil {
			return err
		}
	}
	return nil
}

// HPAToV1 converts a v2 HorizontalPodAutoscaler to v1: spec.targetCPUUtilizationPercentage is the first
// cpu Resource metric with an averageUtilization target, status.currentCPUUtilizationPercentage the last
// cpu Resource current metric with an averageUtilization; the other metrics, all current metrics, the
// behavior and the conditions go into the round-trip annotations (any such annotation in has is dropped
// first). in is not modified. Errors only if a value cannot be JSON-encoded.
func HPAToV1(in *autoscalingv2.HorizontalPodAutoscaler, out *autoscalingv1.HorizontalPodAutoscaler) error {
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Annotations = dropRoundTripAnnotations(out.Annotations)
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas: copyPtr(in.Spec.MinReplicas), MaxReplicas: in.Spec.MaxReplicas}
	var others []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if isCPUUtilization(m) {
			if out.Spec.TargetCPUUtilizationPercentage == nil {
				out.Spec.TargetCPUUtilizationPercentage = ptr.To(*m.Resource.Target.AverageUtilization)
			}
			continue
		}
		others = append(others, metricSpecToV1(m))
	}
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{ObservedGeneration: copyPtr(in.Status.ObservedGeneration),
		LastScaleTime: in.Status.LastScaleTime.DeepCopy(), CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas}
	current := make([]autoscalingv1.MetricStatus, len(in.Status.CurrentMetrics))
	for i, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = ptr.To(*m.Resource.Current.AverageUtilization)
		}
		current[i] = metricStatusToV1(m)
	}
	conditions := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(in.Status.Conditions))
	for i, c := range in.Status.Conditions {
		conditions[i] = autoscalingv1.HorizontalPodAutoscalerCondition{Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
	}
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[key] = string(b)
		return nil
	}
	if len(others) > 0 {
		if err := set(MetricSpecsAnnotation, others); err != nil {
			return err
		}
	}
	if len(current) > 0 {
		if err := set(MetricStatusesAnnotation, current); err != nil {
			return err
		}
	}
	if in.Spec.Behavior != nil {
		if err := set(BehaviorSpecsAnnotation, behaviorToAnnotation(in.Spec.Behavior)); err != nil {
			return err
		}
	}
	if len(conditions) > 0 {
		return set(ConditionsAnnotation, conditions)
	}
	return nil
}

// HPAFromV1 converts a v1 HorizontalPodAutoscaler to v2: the metrics are those of the metrics
// annotation followed by the cpu utilization target; with neither, cpu at DefaultCPUUtilization. The
// behavior, the current metrics (replacing the one currentCPUUtilizationPercentage gives) and the
// conditions come from their annotations; an annotation that does not parse is ignored, as upstream
// does. The round-trip annotations are not kept. in is not modified.
func HPAFromV1(in *autoscalingv1.HorizontalPodAutoscaler, out *autoscalingv2.HorizontalPodAutoscaler) error {
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas: copyPtr(in.Spec.MinReplicas), MaxReplicas: in.Spec.MaxReplicas}
	var cpu []autoscalingv2.MetricSpec
	if in.Spec.TargetCPUUtilizationPercentage != nil {
		cpu = []autoscalingv2.MetricSpec{cpuUtilization(*in.Spec.TargetCPUUtilizationPercentage)}
	}
	out.Spec.Metrics = cpu
	if enc, ok := in.Annotations[MetricSpecsAnnotation]; ok {
		var others []autoscalingv1.MetricSpec
		if json.Unmarshal([]byte(enc), &others) == nil {
			out.Spec.Metrics = make([]autoscalingv2.MetricSpec, 0, len(others)+len(cpu))
			for _, m := range others {
				out.Spec.Metrics = append(out.Spec.Metrics, metricSpecFromV1(m))
			}
			out.Spec.Metrics = append(out.Spec.Metrics, cpu...)
		}
	}
	if enc, ok := in.Annotations[BehaviorSpecsAnnotation]; ok {
		// encoding/json matches keys case-insensitively: the Go field names upstream writes fill the v2 fields
		var b autoscalingv2.HorizontalPodAutoscalerBehavior
		if json.Unmarshal([]byte(enc), &b) == nil && (b.ScaleUp != nil || b.ScaleDown != nil) {
			out.Spec.Behavior = &b
		}
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(DefaultCPUUtilization)}
	}

	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: copyPtr(in.Status.ObservedGeneration),
		LastScaleTime: in.Status.LastScaleTime.DeepCopy(), CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas}
	if p := in.Status.CurrentCPUUtilizationPercentage; p != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(*p)}}}}
	}
	if enc, ok := in.Annotations[MetricStatusesAnnotation]; ok {
		var current []autoscalingv1.MetricStatus
		if json.Unmarshal([]byte(enc), &current) == nil {
			out.Status.CurrentMetrics = make([]autoscalingv2.MetricStatus, len(current))
			for i, m := range current {
				out.Status.CurrentMetrics[i] = metricStatusFromV1(m)
			}
		}
	}
	if enc, ok := in.Annotations[ConditionsAnnotation]; ok {
		var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
		if json.Unmarshal([]byte(enc), &conditions) == nil {
			out.Status.Conditions = make([]autoscalingv2.HorizontalPodAutoscalerCondition, len(conditions))
			for i, c := range conditions {
				out.Status.Conditions[i] = autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type),
					Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
			}
		}
	}
	out.Annotations = dropRoundTripAnnotations(out.Annotations)
	return nil
}

func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
		m.Resource.Target.AverageUtilization != nil
}

func cpuUtilization(pct int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(pct)}}}
}

// dropRoundTripAnnotations returns a copy of in without the round-trip annotations (nil when none is
// left); in itself when it has none of them.
func dropRoundTripAnnotations(in map[string]string) map[string]string {
	has := false
	for _, k := range roundTripAnnotations {
		_, ok := in[k]
		has = has || ok
	}
	if !has {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range roundTripAnnotations {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func metricSpecToV1(in autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(in.Type)}
	if s := in.Object; s != nil {
		out.Object = &autoscalingv1.ObjectMetricSource{Target: autoscalingv1.CrossVersionObjectReference(s.DescribedObject),
			MetricName: s.Metric.Name, TargetValue: value(s.Target.Value), Selector: s.Metric.Selector.DeepCopy(), AverageValue: copyQ(s.Target.AverageValue)}
	}
	if s := in.Pods; s != nil {
		out.Pods = &autoscalingv1.PodsMetricSource{MetricName: s.Metric.Name, TargetAverageValue: value(s.Target.AverageValue),
			Selector: s.Metric.Selector.DeepCopy()}
	}
	if s := in.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: s.Name, TargetAverageUtilization: copyPtr(s.Target.AverageUtilization),
			TargetAverageValue: copyQ(s.Target.AverageValue)}
	}
	if s := in.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			TargetAverageUtilization: copyPtr(s.Target.AverageUtilization), TargetAverageValue: copyQ(s.Target.AverageValue)}
	}
	if s := in.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector.DeepCopy(),
			TargetValue: copyQ(s.Target.Value), TargetAverageValue: copyQ(s.Target.AverageValue)}
	}
	return out
}

// metricSpecFromV1 is upstream's: a target's type is Utilization when a utilization is given, else
// AverageValue (Value for an object without averageValue, an external metric with a value); an
// object metric's zero targetValue beside an averageValue is dropped.
func metricSpecFromV1(in autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(in.Type)}
	if s := in.Object; s != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: copyQ(&s.TargetValue)}
		if s.AverageValue != nil {
			t = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: copyQ(s.AverageValue)}
			if !s.TargetValue.IsZero() {
				t.Value = copyQ(&s.TargetValue)
			}
		}
		out.Object = &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference(s.Target),
			Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector.DeepCopy()}, Target: t}
	}
	if s := in.Pods; s != nil {
		out.Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector.DeepCopy()},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: copyQ(&s.TargetAverageValue)}}
	}
	if s := in.Resource; s != nil {
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: s.Name, Target: resourceTarget(s.TargetAverageUtilization, s.TargetAverageValue)}
	}
	if s := in.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			Target: resourceTarget(s.TargetAverageUtilization, s.TargetAverageValue)}
	}
	if s := in.External; s != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, Value: copyQ(s.TargetValue), AverageValue: copyQ(s.TargetAverageValue)}
		if s.TargetValue != nil {
			t.Type = autoscalingv2.ValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector.DeepCopy()},
			Target: t}
	}
	return out
}

func resourceTarget(utilization *int32, averageValue *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageUtilization: copyPtr(utilization), AverageValue: copyQ(averageValue)}
	if utilization != nil {
		t.Type = autoscalingv2.UtilizationMetricType
	}
	return t
}

func metricStatusToV1(in autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(in.Type)}
	if s := in.Object; s != nil {
		out.Object = &autoscalingv1.ObjectMetricStatus{Target: autoscalingv1.CrossVersionObjectReference(s.DescribedObject), MetricName: s.Metric.Name,
			CurrentValue: value(s.Current.Value), Selector: s.Metric.Selector.DeepCopy(), AverageValue: copyQ(s.Current.AverageValue)}
	}
	if s := in.Pods; s != nil {
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: s.Metric.Name, CurrentAverageValue: value(s.Current.AverageValue),
			Selector: s.Metric.Selector.DeepCopy()}
	}
	if s := in.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: s.Name, CurrentAverageUtilization: copyPtr(s.Current.AverageUtilization),
			CurrentAverageValue: value(s.Current.AverageValue)}
	}
	if s := in.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			CurrentAverageUtilization: copyPtr(s.Current.AverageUtilization), CurrentAverageValue: value(s.Current.AverageValue)}
	}
	if s := in.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector.DeepCopy(),
			CurrentValue: value(s.Current.Value), CurrentAverageValue: copyQ(s.Current.AverageValue)}
	}
	return out
}

// metricStatusFromV1 is upstream's: a v1 current value that is not optional (an object's or external
// metric's currentValue, a pods or resource metric's currentAverageValue) is always set in v2.
func metricStatusFromV1(in autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(in.Type)}
	if s := in.Object; s != nil {
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: autoscalingv2.CrossVersionObjectReference(s.Target),
			Metric:  autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{Value: copyQ(&s.CurrentValue), AverageValue: copyQ(s.AverageValue)}}
	}
	if s := in.Pods; s != nil {
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{AverageValue: copyQ(&s.CurrentAverageValue)}}
	}
	if s := in.Resource; s != nil {
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: s.Name,
			Current: autoscalingv2.MetricValueStatus{AverageValue: copyQ(&s.CurrentAverageValue), AverageUtilization: copyPtr(s.CurrentAverageUtilization)}}
	}
	if s := in.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			Current: autoscalingv2.MetricValueStatus{AverageValue: copyQ(&s.CurrentAverageValue), AverageUtilization: copyPtr(s.CurrentAverageUtilization)}}
	}
	if s := in.External; s != nil {
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{Value: copyQ(&s.CurrentValue), AverageValue: copyQ(s.CurrentAverageValue)}}
	}
	return out
}

// The behavior annotation's shape: kube-apiserver marshals its internal type, which has no JSON tags,
// so the keys are the Go field names and unset fields are null.
type (
	behaviorJSON struct {
		ScaleUp   *rulesJSON
		ScaleDown *rulesJSON
	}
	rulesJSON struct {
		StabilizationWindowSeconds *int32
		SelectPolicy               *autoscalingv2.ScalingPolicySelect
		Policies                   []policyJSON
		Tolerance                  *resource.Quantity
	}
	policyJSON struct {
		Type          autoscalingv2.HPAScalingPolicyType
		Value         int32
		PeriodSeconds int32
	}
)

func behaviorToAnnotation(b *autoscalingv2.HorizontalPodAutoscalerBehavior) behaviorJSON {
	rules := func(r *autoscalingv2.HPAScalingRules) *rulesJSON {
		if r == nil {
			return nil
		}
		out := &rulesJSON{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy, Tolerance: r.Tolerance}
		for _, p := range r.Policies {
			out.Policies = append(out.Policies, policyJSON(p))
		}
		return out
	}
	return behaviorJSON{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

func copyQ(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	return ptr.To(q.DeepCopy())
}

// value is a required v1 quantity from an optional v2 one: zero when unset.
func value(q *resource.Quantity) resource.Quantity {
	if q == nil {
		return resource.Quantity{}
	}
	return q.DeepCopy()
}
