package validation

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/cel/environment"
)

// mutatingOperations are the operations a MutatingAdmissionPolicy can act on: only CREATE and UPDATE
// carry an object to mutate.
var mutatingOperations = []string{string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Create), string(admissionregistrationv1.Update)}

// MutatingAdmissionPolicy validates an admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
// (k8s.io/kubernetes pkg/apis/admissionregistration/validation): failurePolicy (required after
// defaulting; Fail or Ignore), paramKind, matchConstraints (required; resourceRules required, operations
// CREATE, UPDATE or "*" only), matchConditions, variables, mutations (at least one; patchType
// ApplyConfiguration with applyConfiguration or JSONPatch with jsonPatch, not both; the expression
// compiled with CEL against the admission variables and the patch types) and reinvocationPolicy
// (required; Never or IfNeeded).
func MutatingAdmissionPolicy(mp *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	errs := Subdomain(&mp.ObjectMeta)
	spec, p := &mp.Spec, field.NewPath("spec")
	if spec.FailurePolicy == nil {
		errs = append(errs, field.Required(p.Child("failurePolicy"), ""))
	} else {
		errs = append(errs, failurePolicy(spec.FailurePolicy, p.Child("failurePolicy"))...)
	}
	errs = append(errs, paramKind(spec.ParamKind, p.Child("paramKind"))...)
	if spec.MatchConstraints == nil {
		errs = append(errs, field.Required(p.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, matchResources(spec.MatchConstraints, true, p.Child("matchConstraints"))...)
		errs = append(errs, mutatingRuleOperations(spec.MatchConstraints, p.Child("matchConstraints"))...)
	}
	errs = append(errs, matchConditions(spec.MatchConditions, spec.ParamKind != nil, p.Child("matchConditions"))...)
	c, err := celCompiler()
	if err != nil {
		return append(errs, field.InternalError(p, err))
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil, HasAuthorizer: true, HasPatchTypes: true}
	errs = append(errs, variables(c, spec.Variables, opts, p.Child("variables"))...)
	if len(spec.Mutations) == 0 {
		errs = append(errs, field.Required(p.Child("mutations"), "mutations must contain at least one item"))
	}
	for i := range spec.Mutations {
		errs = append(errs, mutation(c, &spec.Mutations[i], opts, p.Child("mutations").Index(i))...)
	}
	if spec.ReinvocationPolicy == "" {
		errs = append(errs, field.Required(p.Child("reinvocationPolicy"), "must specify one of Never, IfNeeded"))
	} else {
		errs = append(errs, oneOf(string(spec.ReinvocationPolicy), p.Child("reinvocationPolicy"),
			string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))...)
	}
	return errs
}

// mutation: patchType with its matching expression (and not the other one), compiled.
func mutation(c *plugincel.CompositedCompiler, m *admissionregistrationv1.Mutation, opts plugincel.OptionalVariableDeclarations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	expr := func(e string, acc plugincel.ExpressionAccessor, ep *field.Path) field.ErrorList {
		if strings.TrimSpace(e) == "" {
			return field.ErrorList{field.Required(ep.Child("expression"), "")}
		}
		return celError(c.CompileCELExpression(acc, opts, environment.NewExpressions), e, ep.Child("expression"))
	}
	switch m.PatchType {
	case "":
		errs = append(errs, field.Required(p.Child("patchType"), "must specify one of ApplyConfiguration, JSONPatch"))
	case admissionregistrationv1.PatchTypeApplyConfiguration:
		if m.ApplyConfiguration == nil {
			errs = append(errs, field.Required(p.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
		} else {
			e := strings.TrimSpace(m.ApplyConfiguration.Expression)
			errs = append(errs, expr(e, &patch.ApplyConfigurationCondition{Expression: e}, p.Child("applyConfiguration"))...)
		}
		if m.JSONPatch != nil {
			errs = append(errs, field.Invalid(p.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
		}
	case admissionregistrationv1.PatchTypeJSONPatch:
		if m.JSONPatch == nil {
			errs = append(errs, field.Required(p.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
		} else {
			e := strings.TrimSpace(m.JSONPatch.Expression)
			errs = append(errs, expr(e, &patch.JSONPatchCondition{Expression: e}, p.Child("jsonPatch"))...)
		}
		if m.ApplyConfiguration != nil {
			errs = append(errs, field.Invalid(p.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("patchType"), m.PatchType, []string{
			string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch)}))
	}
	return errs
}

// mutatingRuleOperations refuses resource rules whose operations are not CREATE, UPDATE or "*" (there
// is no object to mutate on DELETE or CONNECT).
func mutatingRuleOperations(m *admissionregistrationv1.MatchResources, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range m.ResourceRules {
		for j, op := range r.Operations {
			errs = append(errs, oneOf(string(op), p.Child("resourceRules").Index(i).Child("operations").Index(j), mutatingOperations...)...)
		}
	}
	return errs
}

// MutatingAdmissionPolicyBinding validates a MutatingAdmissionPolicyBinding: policyName required (a DNS
// subdomain), paramRef (name or selector, not both; parameterNotFoundAction Allow or Deny) and
// matchResources (resource rule operations CREATE, UPDATE or "*" only).
func MutatingAdmissionPolicyBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	errs := Subdomain(&b.ObjectMeta)
	spec, p := &b.Spec, field.NewPath("spec")
	errs = append(errs, policyName(spec.PolicyName, p.Child("policyName"))...)
	errs = append(errs, paramRef(spec.ParamRef, p.Child("paramRef"))...)
	if spec.MatchResources != nil {
		errs = append(errs, matchResources(spec.MatchResources, false, p.Child("matchResources"))...)
		errs = append(errs, mutatingRuleOperations(spec.MatchResources, p.Child("matchResources"))...)
	}
	return errs
}
