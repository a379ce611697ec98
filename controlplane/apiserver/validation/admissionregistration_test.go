package validation

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func validWebhook() admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:         "a.b.c",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/x")},
		Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "deployments/scale"}}}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

// TestWebhookConfigurationValidation: each broken field is reported at its path with its type.
func TestWebhookConfigurationValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(w *admissionregistrationv1.ValidatingWebhook)
		path string
		typ  field.ErrorType
	}{
		{"valid", func(*admissionregistrationv1.ValidatingWebhook) {}, "", ""},
		{"service", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Port: ptr.To[int32](443)}}
		}, "", ""},
		{"no client", func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.URL = nil }, "webhooks[0].clientConfig", field.ErrorTypeRequired},
		{"bad port", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Port: ptr.To[int32](0)}}
		}, "webhooks[0].clientConfig.service.port", field.ErrorTypeInvalid},
		{"bad caBundle", func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.CABundle = []byte("nope") }, "webhooks[0].clientConfig.caBundle", field.ErrorTypeInvalid},
		{"sideEffects Some", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, "webhooks[0].sideEffects", field.ErrorTypeNotSupported},
		{"no review versions", func(w *admissionregistrationv1.ValidatingWebhook) { w.AdmissionReviewVersions = nil }, "webhooks[0].admissionReviewVersions", field.ErrorTypeRequired},
		{"unknown review version", func(w *admissionregistrationv1.ValidatingWebhook) { w.AdmissionReviewVersions = []string{"v9"} }, "webhooks[0].admissionReviewVersions", field.ErrorTypeInvalid},
		{"timeout 0", func(w *admissionregistrationv1.ValidatingWebhook) { w.TimeoutSeconds = ptr.To[int32](0) }, "webhooks[0].timeoutSeconds", field.ErrorTypeInvalid},
		{"failurePolicy", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.FailurePolicy = ptr.To(admissionregistrationv1.FailurePolicyType("Maybe"))
		}, "webhooks[0].failurePolicy", field.ErrorTypeNotSupported},
		{"matchPolicy", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.MatchPolicy = ptr.To(admissionregistrationv1.MatchPolicyType("Loose"))
		}, "webhooks[0].matchPolicy", field.ErrorTypeNotSupported},
		{"star and more", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules[0].Operations = []admissionregistrationv1.OperationType{"*", "CREATE"}
		}, "webhooks[0].rules[0].operations", field.ErrorTypeInvalid},
		{"no resources", func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].Resources = nil }, "webhooks[0].rules[0].resources", field.ErrorTypeRequired},
		{"bad resource", func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].Resources = []string{"a/b/c"} }, "webhooks[0].rules[0].resources[0]", field.ErrorTypeInvalid},
		{"bad scope", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules[0].Scope = ptr.To(admissionregistrationv1.ScopeType("Galaxy"))
		}, "webhooks[0].rules[0].scope", field.ErrorTypeNotSupported},
		{"bad selector", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
		}, "webhooks[0].namespaceSelector.matchLabels", field.ErrorTypeInvalid},
		{"bad match condition", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "c", Expression: "object.metadata.name"}}
		}, "webhooks[0].matchConditions[0].expression", field.ErrorTypeInvalid},
	} {
		w := validWebhook()
		tc.edit(&w)
		errs := ValidatingWebhookConfiguration(&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{w}})
		if tc.path == "" {
			if len(errs) > 0 {
				t.Errorf("%s: want valid, got %v", tc.name, errs)
			}
			continue
		}
		if !hasCause(errs, tc.path, tc.typ) {
			t.Errorf("%s: want %s at %s, got %v", tc.name, tc.typ, tc.path, errs)
		}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.b.c", ClientConfig: validWebhook().ClientConfig,
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy: ptr.To(admissionregistrationv1.ReinvocationPolicyType("Always"))}}}
	if errs := MutatingWebhookConfiguration(m); !hasCause(errs, "webhooks[0].reinvocationPolicy", field.ErrorTypeNotSupported) {
		t.Errorf("reinvocationPolicy Always: got %v", errs)
	}
}

// TestPolicyValidation: CEL variables are visible to validations, compile errors and wrong result
// types are field errors, and bindings' actions and paramRef are checked.
func TestPolicyValidation(t *testing.T) {
	policy := func(edit func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec)) *admissionregistrationv1.ValidatingAdmissionPolicy {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: validWebhook().Rules[0]}}},
				Variables:   []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}},
				Validations: []admissionregistrationv1.Validation{{Expression: "variables.replicas <= 5", MessageExpression: "'too many: ' + string(variables.replicas)"}},
			}}
		edit(&p.Spec)
		return p
	}
	if errs := ValidatingAdmissionPolicy(policy(func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) {})); len(errs) > 0 {
		t.Fatalf("valid policy: %v", errs)
	}
	for _, tc := range []struct {
		name string
		edit func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec)
		path string
		typ  field.ErrorType
	}{
		{"no validations", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations = nil }, "spec.validations", field.ErrorTypeRequired},
		{"not bool", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations[0].Expression = "1" }, "spec.validations[0].expression", field.ErrorTypeInvalid},
		{"bad message expression", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].MessageExpression = "1 +"
		}, "spec.validations[0].messageExpression", field.ErrorTypeInvalid},
		{"params without paramKind", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "params.x"
		}, "spec.validations[0].expression", field.ErrorTypeInvalid},
		{"bad variable name", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Variables[0].Name = "1x" }, "spec.variables[0].name", field.ErrorTypeInvalid},
		{"no matchConstraints", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.MatchConstraints = nil }, "spec.matchConstraints", field.ErrorTypeRequired},
		{"no resourceRules", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.MatchConstraints.ResourceRules = nil }, "spec.matchConstraints.resourceRules", field.ErrorTypeRequired},
		{"paramKind without kind", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1"}
		}, "spec.paramKind.kind", field.ErrorTypeRequired},
		{"bad reason", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Reason = ptr.To(metav1.StatusReason("Nope"))
		}, "spec.validations[0].reason", field.ErrorTypeNotSupported},
		{"audit annotations", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "k", ValueExpression: "'v'"}}
		}, "spec.auditAnnotations", field.ErrorTypeInvalid},
	} {
		if errs := ValidatingAdmissionPolicy(policy(tc.edit)); !hasCause(errs, tc.path, tc.typ) {
			t.Errorf("%s: want %s at %s, got %v", tc.name, tc.typ, tc.path, errs)
		}
	}
	withParams := policy(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		s.Validations[0].Expression = "params.data.max == string(variables.replicas)"
	})
	if errs := ValidatingAdmissionPolicy(withParams); len(errs) > 0 {
		t.Errorf("policy with params: %v", errs)
	}

	binding := func(spec admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) field.ErrorList {
		return ValidatingAdmissionPolicyBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: spec})
	}
	deny := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	if errs := binding(admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ValidationActions: deny}); len(errs) > 0 {
		t.Errorf("valid binding: %v", errs)
	}
	for _, tc := range []struct {
		name string
		spec admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec
		path string
		typ  field.ErrorType
	}{
		{"no actions", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p"}, "spec.validationActions", field.ErrorTypeRequired},
		{"deny and warn", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Deny", "Warn"}}, "spec.validationActions", field.ErrorTypeInvalid},
		{"audit", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Audit"}}, "spec.validationActions[0]", field.ErrorTypeInvalid},
		{"duplicate", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Deny", "Deny"}}, "spec.validationActions[1]", field.ErrorTypeDuplicate},
		{"paramRef empty", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ValidationActions: deny,
			ParamRef: &admissionregistrationv1.ParamRef{}}, "spec.paramRef", field.ErrorTypeRequired},
		{"paramRef action", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ValidationActions: deny,
			ParamRef: &admissionregistrationv1.ParamRef{Name: "x"}}, "spec.paramRef.parameterNotFoundAction", field.ErrorTypeRequired},
	} {
		if errs := binding(tc.spec); !hasCause(errs, tc.path, tc.typ) {
			t.Errorf("%s: want %s at %s, got %v", tc.name, tc.typ, tc.path, errs)
		}
	}
}
