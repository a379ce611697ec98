package validation

import (
	"strconv"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// intOrPercent parses an int-or-percent field at fp: the integer, whether it was a percentage
// ("25%"), and an Invalid error when a string is not "<int>%".
func intOrPercent(v *intstr.IntOrString, fp *field.Path) (int, bool, *field.Error) {
	if v.Type != intstr.String {
		return v.IntValue(), false, nil
	}
	pct, ok := strings.CutSuffix(v.StrVal, "%")
	n, err := strconv.Atoi(pct)
	if !ok || err != nil {
		return 0, true, field.Invalid(fp, v.StrVal, "must be an integer or a percentage (e.g. '25%')")
	}
	return n, true, nil
}

// PodDisruptionBudget validates a policy/v1 PodDisruptionBudget (upstream
// ValidatePodDisruptionBudgetSpec): at most one of minAvailable and maxUnavailable, each a
// non-negative integer or a percentage of at most 100%; a valid selector; unhealthyPodEvictionPolicy
// IfHealthyBudget or AlwaysAllow.
func PodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := Subdomain(&pdb.ObjectMeta)
	s := &pdb.Spec
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(specPath, s, "minAvailable and maxUnavailable cannot be both set"))
	}
	for _, v := range []struct {
		name string
		val  *intstr.IntOrString
	}{{"minAvailable", s.MinAvailable}, {"maxUnavailable", s.MaxUnavailable}} {
		if v.val == nil {
			continue
		}
		fp := specPath.Child(v.name)
		n, isPercent, err := intOrPercent(v.val, fp)
		switch {
		case err != nil:
			errs = append(errs, err)
		case n < 0:
			errs = append(errs, field.Invalid(fp, v.val.String(), "must be greater than or equal to 0"))
		case isPercent && n > 100:
			errs = append(errs, field.Invalid(fp, v.val.String(), "must not be greater than 100%"))
		}
	}
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
	}
	if p := s.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.IfHealthyBudget && *p != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(specPath.Child("unhealthyPodEvictionPolicy"), *p,
			[]string{string(policyv1.IfHealthyBudget), string(policyv1.AlwaysAllow)}))
	}
	return errs
}

// PodDisruptionBudgetStatus validates a PodDisruptionBudget's status on /status updates: every count
// non-negative (upstream ValidatePodDisruptionBudgetStatusUpdate).
func PodDisruptionBudgetStatus(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	var errs field.ErrorList
	sp := field.NewPath("status")
	for name, v := range map[string]int32{"disruptionsAllowed": pdb.Status.DisruptionsAllowed, "currentHealthy": pdb.Status.CurrentHealthy,
		"desiredHealthy": pdb.Status.DesiredHealthy, "expectedPods": pdb.Status.ExpectedPods} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v), sp.Child(name))...)
	}
	return errs
}
