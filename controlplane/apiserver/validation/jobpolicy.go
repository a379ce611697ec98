package validation

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of a Job's successPolicy, as upstream's.
const (
	maxSuccessPolicyRules            = 20
	maxSuccessPolicyIndexesLength    = 64 * 1024
	successPolicyRequiresIndexedMode = "requires indexed completion mode"
)

// successPolicy validates spec.successPolicy as kube-apiserver does: Indexed completion mode only,
// 1 to 20 rules, each with succeededIndexes (increasing intervals "0,2-4" below completions) and/or
// succeededCount (0 to completions, at most the number of succeededIndexes).
func successPolicy(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		return field.ErrorList{field.Invalid(p, *s.SuccessPolicy, successPolicyRequiresIndexedMode)}
	}
	var errs field.ErrorList
	rulesPath := p.Child("rules")
	rules := s.SuccessPolicy.Rules
	if len(rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if len(rules) > maxSuccessPolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	completions := int32(0)
	if s.Completions != nil {
		completions = *s.Completions
	}
	for i, rule := range rules {
		rp := rulesPath.Index(i)
		if rule.SucceededCount == nil && rule.SucceededIndexes == nil {
			errs = append(errs, field.Required(rp, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var total int32
		if rule.SucceededIndexes != nil {
			ip := rp.Child("succeededIndexes")
			if len(*rule.SucceededIndexes) > maxSuccessPolicyIndexesLength {
				errs = append(errs, field.TooLong(ip, "", maxSuccessPolicyIndexesLength))
			}
			var err error
			if total, err = indexesFormat(*rule.SucceededIndexes, completions); err != nil {
				errs = append(errs, field.Invalid(ip, *rule.SucceededIndexes, fmt.Sprintf("error parsing succeededIndexes: %s", err)))
			}
		}
		if rule.SucceededCount != nil {
			cp := rp.Child("succeededCount")
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*rule.SucceededCount), cp)...)
			if *rule.SucceededCount > completions {
				errs = append(errs, field.Invalid(cp, *rule.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if rule.SucceededIndexes != nil && *rule.SucceededCount > total {
				errs = append(errs, field.Invalid(cp, *rule.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
			}
		}
	}
	return errs
}

// indexesFormat checks an index list ("1,3-5,7": increasing, non-overlapping intervals, each index
// below completions) and returns how many indexes it names; the errors are upstream's.
func indexesFormat(s string, completions int32) (int32, error) {
	if s == "" {
		return 0, nil
	}
	var total int32
	last := int32(-1)
	for _, interval := range strings.Split(s, ",") {
		limits := strings.Split(interval, "-")
		if len(limits) > 2 {
			return 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", interval)
		}
		bounds := make([]int32, len(limits))
		for i, l := range limits {
			v, err := strconv.Atoi(l)
			if err != nil {
				return 0, fmt.Errorf("cannot convert string to integer for index: %q", l)
			}
			if v >= int(completions) {
				return 0, fmt.Errorf("too large index: %q", l)
			}
			bounds[i] = int32(v)
		}
		x, y := bounds[0], bounds[len(bounds)-1]
		if len(bounds) == 2 && x >= y {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", x, y)
		}
		if last >= x {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", last, x)
		}
		total += y - x + 1
		last = y
	}
	return total, nil
}

// Limits of a Job's podFailurePolicy, as upstream's.
const (
	maxPodFailurePolicyRules      = 20
	maxPodFailurePolicyExitCodes  = 255
	maxPodFailurePolicyConditions = 20
)

// podFailurePolicy validates the podFailurePolicy of the Job spec at specPath as kube-apiserver does: at most 20 rules, each
// with an action (FailJob, Ignore, Count; FailIndex only with backoffLimitPerIndex)
// and exactly one of onExitCodes (operator In or NotIn, 1 to 255 ordered unique values, no 0 with
// In, containerName one of the template's containers) and onPodConditions (type a qualified name,
// status True, False or Unknown); the template's restartPolicy must be Never and podReplacementPolicy
// Failed.
func podFailurePolicy(s *batchv1.JobSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := specPath.Child("podFailurePolicy", "rules")
	rules := s.PodFailurePolicy.Rules
	if len(rules) > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxPodFailurePolicyRules))
	}
	names := map[string]bool{}
	for _, c := range s.Template.Spec.Containers {
		names[c.Name] = true
	}
	for _, c := range s.Template.Spec.InitContainers {
		names[c.Name] = true
	}
	actions := []string{string(batchv1.PodFailurePolicyActionCount), string(batchv1.PodFailurePolicyActionFailIndex),
		string(batchv1.PodFailurePolicyActionFailJob), string(batchv1.PodFailurePolicyActionIgnore)}
	for i, rule := range rules {
		rp := rulesPath.Index(i)
		ap := rp.Child("action")
		switch rule.Action {
		case "":
			errs = append(errs, field.Required(ap, fmt.Sprintf("valid values: %q", actions)))
		case batchv1.PodFailurePolicyActionFailIndex:
			if s.BackoffLimitPerIndex == nil {
				errs = append(errs, field.Invalid(ap, rule.Action, "requires the backoffLimitPerIndex to be set"))
			}
		case batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount:
		default:
			errs = append(errs, field.NotSupported(ap, rule.Action, actions))
		}
		if rule.OnExitCodes != nil {
			errs = append(errs, onExitCodes(rule.OnExitCodes, rp.Child("onExitCodes"), names)...)
		}
		if len(rule.OnPodConditions) > 0 {
			errs = append(errs, onPodConditions(rule.OnPodConditions, rp.Child("onPodConditions"))...)
		}
		if rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0 {
			errs = append(errs, field.Invalid(rp, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
		}
		if rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0 {
			errs = append(errs, field.Invalid(rp, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
		}
	}
	if rp := s.Template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyNever {
		errs = append(errs, field.Invalid(specPath.Child("template", "spec", "restartPolicy"), rp,
			fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	if s.PodReplacementPolicy != nil && *s.PodReplacementPolicy != batchv1.Failed {
		errs = append(errs, field.NotSupported(specPath.Child("podReplacementPolicy"), *s.PodReplacementPolicy, []string{string(batchv1.Failed)}))
	}
	return errs
}

func onExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, p *field.Path, names map[string]bool) field.ErrorList {
	var errs field.ErrorList
	ops := []string{string(batchv1.PodFailurePolicyOnExitCodesOpIn), string(batchv1.PodFailurePolicyOnExitCodesOpNotIn)}
	switch r.Operator {
	case "":
		errs = append(errs, field.Required(p.Child("operator"), fmt.Sprintf("valid values: %q", ops)))
	case batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn:
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), r.Operator, ops))
	}
	if r.ContainerName != nil && !names[*r.ContainerName] {
		errs = append(errs, field.Invalid(p.Child("containerName"), *r.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	vp := p.Child("values")
	if len(r.Values) == 0 {
		errs = append(errs, field.Invalid(vp, r.Values, "at least one value is required"))
	} else if len(r.Values) > maxPodFailurePolicyExitCodes {
		errs = append(errs, field.TooMany(vp, len(r.Values), maxPodFailurePolicyExitCodes))
	}
	seen, ordered := map[int32]bool{}, true
	for j, v := range r.Values {
		if r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
			errs = append(errs, field.Invalid(vp.Index(j), v, "must not be 0 for the In operator"))
		}
		if seen[v] {
			errs = append(errs, field.Duplicate(vp.Index(j), v))
		}
		seen[v] = true
		if j > 0 && r.Values[j-1] > v {
			ordered = false
		}
	}
	if !ordered {
		errs = append(errs, field.Invalid(vp, r.Values, "must be ordered"))
	}
	return errs
}

func onPodConditions(patterns []batchv1.PodFailurePolicyOnPodConditionsPattern, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(patterns) > maxPodFailurePolicyConditions {
		errs = append(errs, field.TooMany(p, len(patterns), maxPodFailurePolicyConditions))
	}
	statuses := []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
	for j, pat := range patterns {
		pp := p.Index(j)
		for _, msg := range validation.IsQualifiedName(string(pat.Type)) {
			errs = append(errs, field.Invalid(pp.Child("type"), pat.Type, msg))
		}
		switch pat.Status {
		case "":
			errs = append(errs, field.Required(pp.Child("status"), fmt.Sprintf("valid values: %q", statuses)))
		case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(pp.Child("status"), pat.Status, statuses))
		}
	}
	return errs
}
