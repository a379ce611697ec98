package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RuntimeClass validates a node.k8s.io/v1 RuntimeClass as upstream ValidateRuntimeClass: handler is
// required and a DNS-1123 label (it names a CRI runtime handler); overhead.podFixed quantities are
// non-negative; scheduling.nodeSelector is a valid label set and scheduling.tolerations valid and unique.
// On update (old non-nil) handler is immutable.
func RuntimeClass(rc, old *nodev1.RuntimeClass) field.ErrorList {
	errs := Subdomain(&rc.ObjectMeta)
	hp := field.NewPath("handler")
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(rc.Handler, old.Handler, hp)...)
	}
	if rc.Handler == "" {
		errs = append(errs, field.Required(hp, ""))
	} else {
		for _, msg := range apivalidation.NameIsDNSLabel(rc.Handler, false) {
			errs = append(errs, field.Invalid(hp, rc.Handler, msg))
		}
	}
	if rc.Overhead != nil {
		// upstream reuses the container resource check, so its paths read overhead.limits[...]
		errs = append(errs, resources(&corev1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		sp := field.NewPath("scheduling")
		errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, sp.Child("nodeSelector"))...)
		tp := sp.Child("tolerations")
		errs = append(errs, Tolerations(s.Tolerations, tp)...)
		seen := map[corev1.Toleration]bool{}
		for i, t := range s.Tolerations {
			key := corev1.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect}
			if seen[key] {
				errs = append(errs, field.Duplicate(tp.Index(i), t))
			}
			seen[key] = true
		}
	}
	return errs
}

// Tolerations validates tolerations as upstream ValidateTolerations: a key is a label name; an empty key
// needs operator Exists; tolerationSeconds only with effect NoExecute; operator Equal (or empty) with a
// label value, or Exists with no value; effect empty, NoSchedule, PreferNoSchedule or NoExecute.
func Tolerations(tols []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tols {
		ip := p.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, ip.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(ip.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(ip.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(ip.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
		}
	}
	return errs
}
