package validation

import (
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestPodDisruptionBudgetBadInput: each bad budget is refused with a cause on the field at fault;
// a percentage minAvailable with a selector passes.
func TestPodDisruptionBudgetBadInput(t *testing.T) {
	is := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	mk := func(edit func(s *policyv1.PodDisruptionBudgetSpec)) *policyv1.PodDisruptionBudget {
		p := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
		edit(&p.Spec)
		return p
	}
	bad := policyv1.UnhealthyPodEvictionPolicyType("Sometimes")
	for _, tc := range []struct {
		name, field string
		typ         field.ErrorType
		edit        func(s *policyv1.PodDisruptionBudgetSpec)
	}{
		{"both set", "spec", field.ErrorTypeInvalid, func(s *policyv1.PodDisruptionBudgetSpec) {
			s.MinAvailable, s.MaxUnavailable = is(intstr.FromInt32(1)), is(intstr.FromInt32(1))
		}},
		{"negative minAvailable", "spec.minAvailable", field.ErrorTypeInvalid, func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable = is(intstr.FromInt32(-1)) }},
		{"maxUnavailable 101%", "spec.maxUnavailable", field.ErrorTypeInvalid, func(s *policyv1.PodDisruptionBudgetSpec) { s.MaxUnavailable = is(intstr.FromString("101%")) }},
		{"garbage percent", "spec.minAvailable", field.ErrorTypeInvalid, func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable = is(intstr.FromString("half")) }},
		{"bad selector", "spec.selector.matchLabels", field.ErrorTypeInvalid, func(s *policyv1.PodDisruptionBudgetSpec) {
			s.Selector.MatchLabels = map[string]string{"a": "-bad-"}
		}},
		{"bad policy", "spec.unhealthyPodEvictionPolicy", field.ErrorTypeNotSupported, func(s *policyv1.PodDisruptionBudgetSpec) { s.UnhealthyPodEvictionPolicy = &bad }},
	} {
		if errs := PodDisruptionBudget(mk(tc.edit)); !hasCause(errs, tc.field, tc.typ) {
			t.Errorf("%s: want a %s cause on %s, got %v", tc.name, tc.typ, tc.field, errs)
		}
	}
	if errs := PodDisruptionBudget(mk(func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable = is(intstr.FromString("50%")) })); len(errs) != 0 {
		t.Errorf("minAvailable 50%%: %v", errs)
	}
}
