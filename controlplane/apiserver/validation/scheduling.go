package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PriorityClass values and names as k8s.io/kubernetes pkg/apis/scheduling defines them.
const (
	// HighestUserDefinablePriority is the largest value of a PriorityClass whose name is not system-reserved.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is the base of the system priority classes' values.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemPriorityClassPrefix is reserved for the bootstrap priority classes.
	SystemPriorityClassPrefix = "system-"
	// SystemClusterCritical and SystemNodeCritical are the bootstrap priority classes.
	SystemClusterCritical = SystemPriorityClassPrefix + "cluster-critical"
	SystemNodeCritical    = SystemPriorityClassPrefix + "node-critical"
)

// SystemPriorityClasses returns the bootstrap priority classes kube-apiserver creates
// (system-node-critical 2000001000, system-cluster-critical 2000000000, PreemptLowerPriority).
func SystemPriorityClasses() []schedulingv1.PriorityClass {
	mk := func(name string, value int32, desc string) schedulingv1.PriorityClass {
		pc := schedulingv1.PriorityClass{Value: value, Description: desc}
		pc.Name = name
		policy := corev1.PreemptLowerPriority
		pc.PreemptionPolicy = &policy
		return pc
	}
	return []schedulingv1.PriorityClass{
		mk(SystemNodeCritical, SystemCriticalPriority+1000, "Used for system critical pods that must not be moved from their current node."),
		mk(SystemClusterCritical, SystemCriticalPriority, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
	}
}

// isKnownSystemPriorityClass reports whether name, value and globalDefault are one of the bootstrap
// classes; the error says which property differs (upstream's IsKnownSystemPriorityClass).
func isKnownSystemPriorityClass(name string, value int32, globalDefault bool) error {
	for _, spc := range SystemPriorityClasses() {
		if spc.Name != name {
			continue
		}
		if spc.Value != value {
			return fmt.Errorf("value of %v PriorityClass must be %v", spc.Name, spc.Value)
		}
		if spc.GlobalDefault != globalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", spc.Name, spc.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", name)
}

// PriorityClass validates a scheduling.k8s.io/v1 PriorityClass as k8s.io/kubernetes
// pkg/apis/scheduling/validation does: a DNS-1123 subdomain name; a name starting with "system-" must be
// one of the bootstrap classes with its value and globalDefault; any other class's value is at most
// 1000000000; preemptionPolicy is PreemptLowerPriority or Never. That only one class is globalDefault is
// checked by the Priority admission plugin, which sees the other classes.
func PriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	errs := Subdomain(&pc.ObjectMeta)
	if strings.HasPrefix(pc.Name, SystemPriorityClassPrefix) {
		if err := isKnownSystemPriorityClass(pc.Name, pc.Value, pc.GlobalDefault); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+SystemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	if pc.PreemptionPolicy != nil {
		errs = append(errs, preemptionPolicy(pc.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	}
	return errs
}

// PriorityClassUpdate validates pc and keeps value and preemptionPolicy as they were (upstream's
// ValidatePriorityClassUpdate).
func PriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	errs := PriorityClass(pc)
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	if !apiequality.Semantic.DeepEqual(pc.PreemptionPolicy, old.PreemptionPolicy) {
		errs = append(errs, field.Invalid(field.NewPath("preemptionPolicy"), pc.PreemptionPolicy, "field is immutable"))
	}
	return errs
}

// preemptionPolicy checks a pod's or a PriorityClass's preemptionPolicy (upstream's ValidatePreemptionPolicy).
func preemptionPolicy(p *corev1.PreemptionPolicy, path *field.Path) field.ErrorList {
	switch *p {
	case corev1.PreemptLowerPriority, corev1.PreemptNever:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	default:
		return field.ErrorList{field.NotSupported(path, *p, []string{string(corev1.PreemptLowerPriority), string(corev1.PreemptNever)})}
	}
}

// podPriority checks a pod spec's priorityClassName (a DNS-1123 subdomain) and preemptionPolicy, as
// upstream's ValidatePodSpec.
func podPriority(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.PriorityClassName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(s.PriorityClassName, false) {
			errs = append(errs, field.Invalid(p.Child("priorityClassName"), s.PriorityClassName, msg))
		}
	}
	if s.PreemptionPolicy != nil {
		errs = append(errs, preemptionPolicy(s.PreemptionPolicy, p.Child("preemptionPolicy"))...)
	}
	return errs
}
