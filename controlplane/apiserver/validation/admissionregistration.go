package validation

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/util/webhook"
)

// admissionReviewVersions are the AdmissionReview versions the webhook dispatcher can send.
var admissionReviewVersions = sets.New("v1", "v1beta1")

// noAuditLog is why nodekit refuses the fields that only write audit annotations: its API server keeps
// no audit log, so they would be accepted and do nothing.
const noAuditLog = "not supported by nodekit: its API server keeps no audit log"

// ValidatingWebhookConfiguration validates an admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration
// (k8s.io/kubernetes pkg/apis/admissionregistration/validation): webhook names unique and fully qualified,
// clientConfig (exactly one of url, https only, or service; caBundle PEM), rules, failurePolicy,
// matchPolicy, selectors, sideEffects None or NoneOnDryRun, timeoutSeconds 1-30, admissionReviewVersions
// and matchConditions (CEL, compiled).
func ValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	return append(Subdomain(&c.ObjectMeta), eachWebhook(c.Webhooks, func(w *admissionregistrationv1.ValidatingWebhook, p *field.Path) (string, field.ErrorList) {
		return w.Name, webhookCommon(w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector,
			w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions, p)
	})...)
}

// MutatingWebhookConfiguration validates a MutatingWebhookConfiguration as ValidatingWebhookConfiguration
// does, plus reinvocationPolicy (Never or IfNeeded).
func MutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	return append(Subdomain(&c.ObjectMeta), eachWebhook(c.Webhooks, func(w *admissionregistrationv1.MutatingWebhook, p *field.Path) (string, field.ErrorList) {
		errs := webhookCommon(w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector,
			w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions, p)
		if w.ReinvocationPolicy != nil {
			errs = append(errs, oneOf(string(*w.ReinvocationPolicy), p.Child("reinvocationPolicy"),
				string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))...)
		}
		return w.Name, errs
	})...)
}

// eachWebhook validates webhooks[i] with check, which returns the webhook's name and its other errors,
// and checks the names: fully qualified and unique.
func eachWebhook[W any](webhooks []W, check func(w *W, p *field.Path) (string, field.ErrorList)) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i := range webhooks {
		p := field.NewPath("webhooks").Index(i)
		name, werrs := check(&webhooks[i], p)
		errs = append(errs, utilvalidation.IsFullyQualifiedName(p.Child("name"), name)...)
		if seen.Has(name) {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		seen.Insert(name)
		errs = append(errs, werrs...)
	}
	return errs
}

func webhookCommon(cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, nsSel, objSel *metav1.LabelSelector,
	se *admissionregistrationv1.SideEffectClass, timeout *int32, reviewVersions []string,
	conditions []admissionregistrationv1.MatchCondition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, clientConfig(cc, p.Child("clientConfig"))...)
	for i := range rules {
		errs = append(errs, ruleWithOperations(&rules[i], p.Child("rules").Index(i))...)
	}
	errs = append(errs, failurePolicy(fp, p.Child("failurePolicy"))...)
	errs = append(errs, matchPolicy(mp, p.Child("matchPolicy"))...)
	errs = append(errs, selectors(nsSel, objSel, p)...)
	if se == nil {
		errs = append(errs, field.Required(p.Child("sideEffects"), "must specify one of None, NoneOnDryRun"))
	} else {
		errs = append(errs, oneOf(string(*se), p.Child("sideEffects"),
			string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun))...)
	}
	if timeout != nil && (*timeout < 1 || *timeout > 30) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *timeout, "the timeout value must be between 1 and 30 seconds"))
	}
	rv := p.Child("admissionReviewVersions")
	if len(reviewVersions) == 0 {
		errs = append(errs, field.Required(rv, fmt.Sprintf("must specify one of %s", strings.Join(sets.List(admissionReviewVersions), ", "))))
	}
	seen, known := sets.New[string](), false
	for i, v := range reviewVersions {
		if seen.Has(v) {
			errs = append(errs, field.Duplicate(rv.Index(i), v))
		}
		seen.Insert(v)
		known = known || admissionReviewVersions.Has(v)
	}
	if len(reviewVersions) > 0 && !known {
		errs = append(errs, field.Invalid(rv, reviewVersions, fmt.Sprintf("must include at least one of %s", strings.Join(sets.List(admissionReviewVersions), ", "))))
	}
	errs = append(errs, matchConditions(conditions, false, p.Child("matchConditions"))...)
	return errs
}

// clientConfig: exactly one of url (https, a host, no user, query or fragment) and service (name,
// namespace, path, port 1-65535); caBundle, when set, is PEM certificates.
func clientConfig(cc admissionregistrationv1.WebhookClientConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case cc.URL == nil && cc.Service == nil:
		errs = append(errs, field.Required(p, "exactly one of url or service is required"))
	case cc.URL != nil && cc.Service != nil:
		errs = append(errs, field.Required(p, "exactly one of url or service is required (both are set)"))
	case cc.URL != nil:
		errs = append(errs, webhook.ValidateWebhookURL(p.Child("url"), *cc.URL, true)...)
	default:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		errs = append(errs, webhook.ValidateWebhookService(p.Child("service"), cc.Service.Name, cc.Service.Namespace, cc.Service.Path, port)...)
	}
	if len(cc.CABundle) > 0 {
		errs = append(errs, webhook.ValidateCABundle(p.Child("caBundle"), cc.CABundle)...)
	}
	return errs
}

var operations = sets.New(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete,
	admissionregistrationv1.Connect, admissionregistrationv1.OperationAll)

func ruleWithOperations(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	op := p.Child("operations")
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(op, ""))
	}
	if len(r.Operations) > 1 && sets.New(r.Operations...).Has(admissionregistrationv1.OperationAll) {
		errs = append(errs, field.Invalid(op, r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, o := range r.Operations {
		if !operations.Has(o) {
			errs = append(errs, field.NotSupported(op.Index(i), o, []string{"CREATE", "UPDATE", "DELETE", "CONNECT", "*"}))
		}
	}
	return append(errs, rule(&r.Rule, p)...)
}

// rule: apiGroups, apiVersions and resources non-empty ("*" alone), resources "name", "name/sub",
// "*", "*/*", "name/*" or "*/sub", and scope Cluster, Namespaced or "*".
func rule(r *admissionregistrationv1.Rule, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		name   string
		values []string
	}{{"apiGroups", r.APIGroups}, {"apiVersions", r.APIVersions}} {
		if len(l.values) == 0 {
			errs = append(errs, field.Required(p.Child(l.name), ""))
		}
		if len(l.values) > 1 && sets.New(l.values...).Has("*") {
			errs = append(errs, field.Invalid(p.Child(l.name), l.values, "if '*' is present, must not specify other "+l.name))
		}
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	res := p.Child("resources")
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(res, ""))
	}
	all := sets.New(r.Resources...)
	for i, rs := range r.Resources {
		name, sub, hasSub := strings.Cut(rs, "/")
		switch {
		case name == "" || (hasSub && (sub == "" || strings.Contains(sub, "/"))):
			errs = append(errs, field.Invalid(res.Index(i), rs, "must be resource, resource/subresource, '*', '*/*', 'resource/*' or '*/subresource'"))
		case rs == "*" && len(r.Resources) > 1 && !(len(r.Resources) == 2 && all.Has("*/*")):
			errs = append(errs, field.Invalid(res.Index(i), rs, "if '*' is present, must not specify other resources without subresources"))
		case rs == "*/*" && len(r.Resources) > 1 && !(len(r.Resources) == 2 && all.Has("*")):
			errs = append(errs, field.Invalid(res.Index(i), rs, "if '*/*' is present, must not specify other resources"))
		case hasSub && name != "*" && sub != "*" && all.Has(name+"/*"):
			errs = append(errs, field.Invalid(res.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", name, rs)))
		}
	}
	if r.Scope != nil {
		errs = append(errs, oneOf(string(*r.Scope), p.Child("scope"), string(admissionregistrationv1.ClusterScope),
			string(admissionregistrationv1.NamespacedScope), string(admissionregistrationv1.AllScopes))...)
	}
	return errs
}

func failurePolicy(fp *admissionregistrationv1.FailurePolicyType, p *field.Path) field.ErrorList {
	if fp == nil {
		return nil
	}
	return oneOf(string(*fp), p, string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore))
}

func matchPolicy(mp *admissionregistrationv1.MatchPolicyType, p *field.Path) field.ErrorList {
	if mp == nil {
		return nil
	}
	return oneOf(string(*mp), p, string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent))
}

func selectors(ns, obj *metav1.LabelSelector, p *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	var errs field.ErrorList
	if ns != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(ns, opts, p.Child("namespaceSelector"))...)
	}
	if obj != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(obj, opts, p.Child("objectSelector"))...)
	}
	return errs
}

func oneOf(v string, p *field.Path, allowed ...string) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

// celCompiler is the CEL environment ValidatingAdmissionPolicy and webhook matchConditions run in
// (k8s.io/apiserver's base environment with the admission variables).
func celCompiler() (*plugincel.CompositedCompiler, error) {
	return plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
}

// celError turns a compile result into a field error on p (nil when it compiled).
func celError(r plugincel.CompilationResult, value string, p *field.Path) field.ErrorList {
	if r.Error == nil {
		return nil
	}
	return field.ErrorList{field.Invalid(p, value, r.Error.Detail)}
}

// matchConditions: at most 64, names qualified and unique, expressions compiled to bool.
func matchConditions(conds []admissionregistrationv1.MatchCondition, params bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > 64 {
		errs = append(errs, field.TooMany(p, len(conds), 64))
	}
	if len(conds) == 0 {
		return errs
	}
	c, err := celCompiler()
	if err != nil {
		return append(errs, field.InternalError(p, err))
	}
	seen := sets.New[string]()
	for i := range conds {
		mc := &conds[i]
		ip := p.Index(i)
		for _, msg := range utilvalidation.IsQualifiedName(mc.Name) {
			errs = append(errs, field.Invalid(ip.Child("name"), mc.Name, msg))
		}
		if seen.Has(mc.Name) {
			errs = append(errs, field.Duplicate(ip.Child("name"), mc.Name))
		}
		seen.Insert(mc.Name)
		if mc.Expression == "" {
			errs = append(errs, field.Required(ip.Child("expression"), ""))
			continue
		}
		r := c.CompileCELExpression((*matchconditions.MatchCondition)(mc),
			plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, environment.NewExpressions)
		errs = append(errs, celError(r, mc.Expression, ip.Child("expression"))...)
	}
	return errs
}

var validationReasons = []string{string(metav1.StatusReasonUnauthorized), string(metav1.StatusReasonForbidden),
	string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge)}

// ValidatingAdmissionPolicy validates a ValidatingAdmissionPolicy: paramKind (apiVersion group/version,
// kind), matchConstraints (required; resourceRules required, selectors, matchPolicy), failurePolicy,
// variables, matchConditions and validations (at least one; expression and messageExpression compiled
// with CEL against the admission variables; message single-line; reason one of Unauthorized, Forbidden,
// Invalid, RequestEntityTooLarge). auditAnnotations are refused (no audit log).
func ValidatingAdmissionPolicy(vap *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	errs := Subdomain(&vap.ObjectMeta)
	spec, p := &vap.Spec, field.NewPath("spec")
	errs = append(errs, paramKind(spec.ParamKind, p.Child("paramKind"))...)
	if spec.MatchConstraints == nil {
		errs = append(errs, field.Required(p.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, matchResources(spec.MatchConstraints, true, p.Child("matchConstraints"))...)
	}
	errs = append(errs, failurePolicy(spec.FailurePolicy, p.Child("failurePolicy"))...)
	if len(spec.AuditAnnotations) > 0 {
		errs = append(errs, field.Invalid(p.Child("auditAnnotations"), len(spec.AuditAnnotations), noAuditLog))
	}
	if len(spec.Validations) == 0 {
		errs = append(errs, field.Required(p.Child("validations"), "validations must contain at least one item"))
	}
	errs = append(errs, matchConditions(spec.MatchConditions, spec.ParamKind != nil, p.Child("matchConditions"))...)
	c, err := celCompiler()
	if err != nil {
		return append(errs, field.InternalError(p, err))
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil, HasAuthorizer: true}
	errs = append(errs, variables(c, spec.Variables, opts, p.Child("variables"))...)
	for i, v := range spec.Validations {
		vp := p.Child("validations").Index(i)
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
		} else {
			r := c.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, opts, environment.NewExpressions)
			errs = append(errs, celError(r, v.Expression, vp.Child("expression"))...)
		}
		if v.MessageExpression != "" {
			r := c.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression},
				plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil}, environment.NewExpressions)
			errs = append(errs, celError(r, v.MessageExpression, vp.Child("messageExpression"))...)
		}
		if strings.ContainsAny(v.Message, "\r\n") {
			errs = append(errs, field.Invalid(vp.Child("message"), v.Message, "message must not contain line breaks"))
		}
		if v.Reason != nil {
			errs = append(errs, oneOf(string(*v.Reason), vp.Child("reason"), validationReasons...)...)
		}
	}
	return errs
}

// ValidatingAdmissionPolicyStatus validates a /status update: typeChecking's warnings name a field
// and carry a warning.
func ValidatingAdmissionPolicyStatus(vap *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	var errs field.ErrorList
	if tc := vap.Status.TypeChecking; tc != nil {
		for i, w := range tc.ExpressionWarnings {
			wp := field.NewPath("status", "typeChecking", "expressionWarnings").Index(i)
			if w.FieldRef == "" {
				errs = append(errs, field.Required(wp.Child("fieldRef"), ""))
			}
			if w.Warning == "" {
				errs = append(errs, field.Required(wp.Child("warning"), ""))
			}
		}
	}
	return errs
}

func celIdentifier(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// matchResources validates a policy's matchConstraints (resourceRules required) or a binding's
// matchResources.
func matchResources(m *admissionregistrationv1.MatchResources, rulesRequired bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, matchPolicy(m.MatchPolicy, p.Child("matchPolicy"))...)
	errs = append(errs, selectors(m.NamespaceSelector, m.ObjectSelector, p)...)
	if rulesRequired && len(m.ResourceRules) == 0 {
		errs = append(errs, field.Required(p.Child("resourceRules"), ""))
	}
	for i := range m.ResourceRules {
		errs = append(errs, namedRule(&m.ResourceRules[i], p.Child("resourceRules").Index(i))...)
	}
	for i := range m.ExcludeResourceRules {
		errs = append(errs, namedRule(&m.ExcludeResourceRules[i], p.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

func namedRule(r *admissionregistrationv1.NamedRuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, n := range r.ResourceNames {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(n) {
			errs = append(errs, field.Invalid(p.Child("resourceNames").Index(i), n, msg))
		}
	}
	return append(errs, ruleWithOperations(&r.RuleWithOperations, p)...)
}

// ValidatingAdmissionPolicyBinding validates a binding: policyName required, validationActions
// non-empty, unique, Deny or Warn (not both; Audit is refused: no audit log), paramRef (name or
// selector, not both; parameterNotFoundAction Allow or Deny) and matchResources.
func ValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	errs := Subdomain(&b.ObjectMeta)
	spec, p := &b.Spec, field.NewPath("spec")
	errs = append(errs, policyName(spec.PolicyName, p.Child("policyName"))...)
	ap := p.Child("validationActions")
	if len(spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(ap, "at least one validation action is required"))
	}
	actions := sets.New[admissionregistrationv1.ValidationAction]()
	for i, a := range spec.ValidationActions {
		switch {
		case actions.Has(a):
			errs = append(errs, field.Duplicate(ap.Index(i), a))
		case a == admissionregistrationv1.Audit:
			errs = append(errs, field.Invalid(ap.Index(i), a, noAuditLog))
		case a != admissionregistrationv1.Deny && a != admissionregistrationv1.Warn:
			errs = append(errs, field.NotSupported(ap.Index(i), a, []string{string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn)}))
		}
		actions.Insert(a)
	}
	if actions.Has(admissionregistrationv1.Deny) && actions.Has(admissionregistrationv1.Warn) {
		errs = append(errs, field.Invalid(ap, spec.ValidationActions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	errs = append(errs, paramRef(spec.ParamRef, p.Child("paramRef"))...)
	if spec.MatchResources != nil {
		errs = append(errs, matchResources(spec.MatchResources, false, p.Child("matchResources"))...)
	}
	return errs
}

// policyName: a binding's policy, required, a DNS subdomain.
func policyName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// paramRef: name or selector (not both), parameterNotFoundAction Allow or Deny (nil: no params).
func paramRef(pr *admissionregistrationv1.ParamRef, pp *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case pr.Name == "" && pr.Selector == nil:
		errs = append(errs, field.Required(pp, "one of name or selector must be specified"))
	case pr.Name != "" && pr.Selector != nil:
		errs = append(errs, field.Forbidden(pp.Child("name"), "name and selector are mutually exclusive"))
	}
	if pr.Name != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(pr.Name) {
			errs = append(errs, field.Invalid(pp.Child("name"), pr.Name, msg))
		}
	}
	if pr.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(pr.Selector, metav1validation.LabelSelectorValidationOptions{}, pp.Child("selector"))...)
	}
	if pr.ParameterNotFoundAction == nil {
		errs = append(errs, field.Required(pp.Child("parameterNotFoundAction"), ""))
	} else {
		errs = append(errs, oneOf(string(*pr.ParameterNotFoundAction), pp.Child("parameterNotFoundAction"),
			string(admissionregistrationv1.AllowAction), string(admissionregistrationv1.DenyAction))...)
	}
	return errs
}

// paramKind: apiVersion group/version or version, kind a DNS-1035 label when lowercased (nil: no params).
func paramKind(pk *admissionregistrationv1.ParamKind, pp *field.Path) field.ErrorList {
	if pk == nil {
		return nil
	}
	var errs field.ErrorList
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(pp.Child("apiVersion"), ""))
	} else if gv, err := schema.ParseGroupVersion(pk.APIVersion); err != nil || gv.Version == "" {
		errs = append(errs, field.Invalid(pp.Child("apiVersion"), pk.APIVersion, "must be group/version or version"))
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(pp.Child("kind"), ""))
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(pp.Child("kind"), pk.Kind, strings.Join(msgs, ", ")))
	}
	return errs
}

// variables: names unique CEL identifiers, expressions compiled (and stored in c, so that later
// expressions may use variables.<name>).
func variables(c *plugincel.CompositedCompiler, vars []admissionregistrationv1.Variable, opts plugincel.OptionalVariableDeclarations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range vars {
		vp := p.Index(i)
		if v.Name == "" {
			errs = append(errs, field.Required(vp.Child("name"), ""))
		} else if !celIdentifier(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "must be a valid CEL identifier"))
		} else if names.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		names.Insert(v.Name)
		if v.Expression == "" {
			errs = append(errs, field.Required(vp.Child("expression"), ""))
			continue
		}
		r := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
		errs = append(errs, celError(r, v.Expression, vp.Child("expression"))...)
	}
	return errs
}
