package validation

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestMutatingPolicyValidation(t *testing.T) {
	policy := func(edit func(s *admissionregistrationv1.MutatingAdmissionPolicySpec)) *admissionregistrationv1.MutatingAdmissionPolicy {
		p := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: validWebhook().Rules[0]}}},
				Variables: []admissionregistrationv1.Variable{{Name: "n", Expression: "object.spec.replicas + 1"}},
				Mutations: []admissionregistrationv1.Mutation{
					{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
						Expression: `Object{metadata: Object.metadata{labels: {"a": "b"}}}`}},
					{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{
						Expression: `[JSONPatch{op: "replace", path: "/spec/replicas", value: variables.n}]`}},
				},
				ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
			}}
		edit(&p.Spec)
		return p
	}
	if errs := MutatingAdmissionPolicy(policy(func(*admissionregistrationv1.MutatingAdmissionPolicySpec) {})); len(errs) > 0 {
		t.Fatalf("valid policy: %v", errs)
	}
	for _, tc := range []struct {
		name string
		edit func(s *admissionregistrationv1.MutatingAdmissionPolicySpec)
		path string
		typ  field.ErrorType
	}{
		{"no failurePolicy", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.FailurePolicy = nil }, "spec.failurePolicy", field.ErrorTypeRequired},
		{"no mutations", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Mutations = nil }, "spec.mutations", field.ErrorTypeRequired},
		{"no patchType", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Mutations[0].PatchType = "" }, "spec.mutations[0].patchType", field.ErrorTypeRequired},
		{"bad patchType", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Mutations[0].PatchType = "Merge" }, "spec.mutations[0].patchType", field.ErrorTypeNotSupported},
		{"no applyConfiguration", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Mutations[0].ApplyConfiguration = nil }, "spec.mutations[0].applyConfiguration", field.ErrorTypeRequired},
		{"both patches", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations[1].ApplyConfiguration = &admissionregistrationv1.ApplyConfiguration{Expression: "Object{}"}
		}, "spec.mutations[1].applyConfiguration", field.ErrorTypeInvalid},
		{"empty expression", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations[1].JSONPatch.Expression = " "
		}, "spec.mutations[1].jsonPatch.expression", field.ErrorTypeRequired},
		{"jsonPatch not a list", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations[1].JSONPatch.Expression = "1"
		}, "spec.mutations[1].jsonPatch.expression", field.ErrorTypeInvalid},
		{"params without paramKind", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations[0].ApplyConfiguration.Expression = "params.x"
		}, "spec.mutations[0].applyConfiguration.expression", field.ErrorTypeInvalid},
		{"bad variable", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Variables[0].Expression = "1 +" }, "spec.variables[0].expression", field.ErrorTypeInvalid},
		{"no reinvocationPolicy", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.ReinvocationPolicy = "" }, "spec.reinvocationPolicy", field.ErrorTypeRequired},
		{"bad reinvocationPolicy", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.ReinvocationPolicy = "Always" }, "spec.reinvocationPolicy", field.ErrorTypeNotSupported},
		{"DELETE", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
		}, "spec.matchConstraints.resourceRules[0].operations[0]", field.ErrorTypeNotSupported},
		{"no resourceRules", func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.MatchConstraints.ResourceRules = nil }, "spec.matchConstraints.resourceRules", field.ErrorTypeRequired},
	} {
		if errs := MutatingAdmissionPolicy(policy(tc.edit)); !hasCause(errs, tc.path, tc.typ) {
			t.Errorf("%s: want %s at %s, got %v", tc.name, tc.typ, tc.path, errs)
		}
	}
	withParams := policy(func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
		s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		s.Mutations[0].ApplyConfiguration.Expression = `Object{metadata: Object.metadata{labels: {"a": params.data.a}}}`
	})
	if errs := MutatingAdmissionPolicy(withParams); len(errs) > 0 {
		t.Errorf("policy with params: %v", errs)
	}

	binding := func(spec admissionregistrationv1.MutatingAdmissionPolicyBindingSpec) field.ErrorList {
		return MutatingAdmissionPolicyBinding(&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: spec})
	}
	if errs := binding(admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "p"}); len(errs) > 0 {
		t.Errorf("valid binding: %v", errs)
	}
	for _, tc := range []struct {
		name string
		spec admissionregistrationv1.MutatingAdmissionPolicyBindingSpec
		path string
		typ  field.ErrorType
	}{
		{"no policyName", admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{}, "spec.policyName", field.ErrorTypeRequired},
		{"paramRef both", admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "p", ParamRef: &admissionregistrationv1.ParamRef{
			Name: "x", Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}}, "spec.paramRef.name", field.ErrorTypeForbidden},
		{"CONNECT", admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "p", MatchResources: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Connect}, Rule: validWebhook().Rules[0].Rule}}}}},
			"spec.matchResources.resourceRules[0].operations[0]", field.ErrorTypeNotSupported},
	} {
		if errs := binding(tc.spec); !hasCause(errs, tc.path, tc.typ) {
			t.Errorf("%s: want %s at %s, got %v", tc.name, tc.typ, tc.path, errs)
		}
	}
}
