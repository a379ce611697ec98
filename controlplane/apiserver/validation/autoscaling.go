package validation

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// hpaMaxPeriodSeconds is the largest scaling policy period upstream accepts (s).
	hpaMaxPeriodSeconds int32 = 1800
	// hpaMaxStabilizationWindowSeconds is the largest stabilization window upstream accepts (s).
	hpaMaxStabilizationWindowSeconds int32 = 3600
)

// HorizontalPodAutoscaler validates an autoscaling/v2 HorizontalPodAutoscaler as kube-apiserver's
// ValidateHorizontalPodAutoscaler(Update) with the strategy's options: the name a path segment;
// minReplicas >= 1 (0 only when the stored object already has it, as the HPAScaleToZero gate is off);
// maxReplicas >= 1 and >= minReplicas; scaleTargetRef kind, name and an apiVersion with a group (empty
// group only for ReplicationController; not re-checked on an update that keeps kind and apiVersion);
// each metric of one source type with its target; behavior's windows (0..3600 s), selectPolicy and
// policies (type Pods/Percent, value > 0, period 1..1800 s). old is nil on create.
func HorizontalPodAutoscaler(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := Name(&h.ObjectMeta, path.ValidatePathSegmentName)
	sp := field.NewPath("spec")
	s := &h.Spec
	lower := int32(1)
	if old != nil && old.Spec.MinReplicas != nil && *old.Spec.MinReplicas == 0 {
		lower = 0
	}
	if s.MinReplicas != nil && *s.MinReplicas < lower {
		errs = append(errs, field.Invalid(sp.Child("minReplicas"), *s.MinReplicas, fmt.Sprintf("must be greater than or equal to %d", lower)))
	}
	if s.MaxReplicas == 0 {
		errs = append(errs, field.Required(sp.Child("maxReplicas"), "must be set and greater than 0"))
	} else if s.MaxReplicas < 0 {
		errs = append(errs, field.Invalid(sp.Child("maxReplicas"), s.MaxReplicas, "must be greater than or equal to 1"))
	}
	if s.MinReplicas != nil && s.MaxReplicas < *s.MinReplicas {
		errs = append(errs, field.Invalid(sp.Child("maxReplicas"), s.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	ref := s.ScaleTargetRef
	checkAPIVersion := old == nil || old.Spec.ScaleTargetRef.APIVersion != ref.APIVersion || old.Spec.ScaleTargetRef.Kind != ref.Kind
	errs = append(errs, crossVersionRef(ref, sp.Child("scaleTargetRef"), checkAPIVersion, ref.Kind == "ReplicationController")...)
	errs = append(errs, hpaMetrics(s.Metrics, s.MinReplicas, sp.Child("metrics"))...)
	if b := s.Behavior; b != nil {
		errs = append(errs, scalingRules(b.ScaleUp, sp.Child("behavior", "scaleUp"))...)
		errs = append(errs, scalingRules(b.ScaleDown, sp.Child("behavior", "scaleDown"))...)
	}
	return errs
}

// HorizontalPodAutoscalerStatus validates a /status update: conditions' observedGeneration,
// currentReplicas and desiredReplicas non-negative.
func HorizontalPodAutoscalerStatus(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	var errs field.ErrorList
	st := field.NewPath("status")
	for i, c := range h.Status.Conditions {
		if c.ObservedGeneration != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(*c.ObservedGeneration, st.Child("conditions").Index(i).Child("observedGeneration"))...)
		}
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(h.Status.CurrentReplicas), st.Child("currentReplicas"))...)
	return append(errs, apivalidation.ValidateNonnegativeField(int64(h.Status.DesiredReplicas), st.Child("desiredReplicas"))...)
}

// crossVersionRef checks a CrossVersionObjectReference: kind and name path segments, apiVersion a
// group/version (with a group unless emptyGroup) when checkVersion.
func crossVersionRef(ref autoscalingv2.CrossVersionObjectReference, p *field.Path, checkVersion, emptyGroup bool) field.ErrorList {
	errs := pathSegment(ref.Kind, p.Child("kind"))
	errs = append(errs, pathSegment(ref.Name, p.Child("name"))...)
	if !checkVersion {
		return errs
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err == nil && !emptyGroup && gv.Group == "" {
		err = fmt.Errorf("apiVersion must specify API group")
	}
	if err != nil {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	return errs
}

var (
	hpaMetricSourceTypes = []string{string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
		string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType), string(autoscalingv2.ResourceMetricSourceType)}
	hpaSelectPolicies = []string{string(autoscalingv2.DisabledPolicySelect), string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect)}
	hpaPolicyTypes    = []string{string(autoscalingv2.PercentScalingPolicy), string(autoscalingv2.PodsScalingPolicy)}
)

func hpaMetrics(metrics []autoscalingv2.MetricSpec, minReplicas *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	objectOrExternal := false
	for i := range metrics {
		errs = append(errs, metricSpec(&metrics[i], p.Index(i))...)
		if t := metrics[i].Type; t == autoscalingv2.ObjectMetricSourceType || t == autoscalingv2.ExternalMetricSourceType {
			objectOrExternal = true
		}
	}
	if minReplicas != nil && *minReplicas == 0 && !objectOrExternal {
		errs = append(errs, field.Forbidden(p, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return errs
}

// metricSpec checks one metric: a known type, exactly the matching source populated, and that source.
func metricSpec(m *autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	}
	known := false
	for _, t := range hpaMetricSourceTypes {
		known = known || string(m.Type) == t
	}
	if !known {
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, hpaMetricSourceTypes))
	}
	// the sources present, in upstream's order; only the first is validated
	present := []string{}
	add := func(name string, set bool, check func() field.ErrorList) {
		if !set {
			return
		}
		present = append(present, name)
		if len(present) == 1 {
			errs = append(errs, check()...)
		}
	}
	add("object", m.Object != nil, func() field.ErrorList { return objectSource(m.Object, p.Child("object")) })
	add("external", m.External != nil, func() field.ErrorList { return externalSource(m.External, p.Child("external")) })
	add("pods", m.Pods != nil, func() field.ErrorList { return podsSource(m.Pods, p.Child("pods")) })
	add("resource", m.Resource != nil, func() field.ErrorList {
		return resourceSource(m.Resource.Name, m.Resource.Target, p.Child("resource"))
	})
	add("containerResource", m.ContainerResource != nil, func() field.ErrorList {
		return containerResourceSource(m.ContainerResource, p.Child("containerResource"))
	})
	expected, set := "", false
	switch m.Type {
	case autoscalingv2.ObjectMetricSourceType:
		expected, set = "object", m.Object != nil
	case autoscalingv2.PodsMetricSourceType:
		expected, set = "pods", m.Pods != nil
	case autoscalingv2.ResourceMetricSourceType:
		expected, set = "resource", m.Resource != nil
	case autoscalingv2.ExternalMetricSourceType:
		expected, set = "external", m.External != nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		expected, set = "containerResource", m.ContainerResource != nil
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, hpaMetricSourceTypes))
	}
	if expected != "" && !set {
		errs = append(errs, field.Required(p.Child(expected), "must populate information for the given metric source"))
	}
	if len(present) != 1 {
		for _, name := range present {
			if name != expected {
				errs = append(errs, field.Forbidden(p.Child(name), "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func objectSource(s *autoscalingv2.ObjectMetricSource, p *field.Path) field.ErrorList {
	errs := crossVersionRef(s.DescribedObject, p.Child("describedObject"), true, true)
	errs = append(errs, metricIdentifier(s.Metric, p.Child("metric"))...)
	errs = append(errs, metricTarget(s.Target, p.Child("target"))...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

func externalSource(s *autoscalingv2.ExternalMetricSource, p *field.Path) field.ErrorList {
	errs := metricIdentifier(s.Metric, p.Child("metric"))
	errs = append(errs, metricTarget(s.Target, p.Child("target"))...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if s.Target.Value != nil && s.Target.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

func podsSource(s *autoscalingv2.PodsMetricSource, p *field.Path) field.ErrorList {
	errs := metricIdentifier(s.Metric, p.Child("metric"))
	errs = append(errs, metricTarget(s.Target, p.Child("target"))...)
	if s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return errs
}

func containerResourceSource(s *autoscalingv2.ContainerResourceMetricSource, p *field.Path) field.ErrorList {
	errs := resourceSource(s.Name, s.Target, p)
	if s.Container == "" {
		errs = append(errs, field.Required(p.Child("container"), "must specify a container"))
	} else {
		for _, msg := range apivalidation.NameIsDNSLabel(s.Container, false) {
			errs = append(errs, field.Invalid(p.Child("container"), s.Container, msg))
		}
	}
	return errs
}

// resourceSource checks a Resource (or ContainerResource) source: a name, a valid target, exactly one
// of averageUtilization and averageValue.
func resourceSource(name corev1.ResourceName, t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	}
	errs = append(errs, metricTarget(t, p.Child("target"))...)
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return errs
}

func metricTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric target type"))
	}
	if t.Type != autoscalingv2.UtilizationMetricType && t.Type != autoscalingv2.ValueMetricType && t.Type != autoscalingv2.AverageValueMetricType {
		errs = append(errs, field.Invalid(p.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("averageValue"), t.AverageValue, "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(p.Child("averageUtilization"), t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

func metricIdentifier(id autoscalingv2.MetricIdentifier, p *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(p.Child("name"), "must specify a metric name")}
	}
	return pathSegment(id.Name, p.Child("name"))
}

func scalingRules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil && *w < 0 {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), r.StabilizationWindowSeconds, "must be greater than or equal to zero"))
	} else if w != nil && *w > hpaMaxStabilizationWindowSeconds {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), r.StabilizationWindowSeconds,
			fmt.Sprintf("must be less than or equal to %v", hpaMaxStabilizationWindowSeconds)))
	}
	if sp := r.SelectPolicy; sp != nil && *sp != autoscalingv2.MaxChangePolicySelect && *sp != autoscalingv2.MinChangePolicySelect && *sp != autoscalingv2.DisabledPolicySelect {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), r.SelectPolicy, hpaSelectPolicies))
	}
	pp := p.Child("policies")
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(pp, "must specify at least one Policy"))
	}
	for i, pol := range r.Policies {
		ip := pp.Index(i)
		if pol.Type != autoscalingv2.PodsScalingPolicy && pol.Type != autoscalingv2.PercentScalingPolicy {
			errs = append(errs, field.NotSupported(ip.Child("type"), pol.Type, hpaPolicyTypes))
		}
		if pol.Value <= 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), pol.Value, "must be greater than zero"))
		}
		if pol.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds, "must be greater than zero"))
		}
		if pol.PeriodSeconds > hpaMaxPeriodSeconds {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds, fmt.Sprintf("must be less than or equal to %v", hpaMaxPeriodSeconds)))
		}
	}
	if r.Tolerance != nil {
		if r.Tolerance.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("tolerance"), r.Tolerance.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}
