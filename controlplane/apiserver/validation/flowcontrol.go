package validation

import (
	"fmt"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/util/shufflesharding"
)

var (
	flowVerbs           = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}
	flowSubjectKinds    = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	flowDistinguishers  = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	priorityLevelTypes  = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	limitResponseTypes  = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
	maxQueues           = int32(10 * 1000 * 1000)
	maxMatchPrecedence  = int32(10000)
	mandatoryFlows      = map[string]*flowcontrolv1.FlowSchema{}
	mandatoryPriorities = map[string]*flowcontrolv1.PriorityLevelConfiguration{}
)

func init() {
	for _, fs := range bootstrap.MandatoryFlowSchemas {
		mandatoryFlows[fs.Name] = fs
	}
	for _, pl := range bootstrap.MandatoryPriorityLevelConfigurations {
		mandatoryPriorities[pl.Name] = pl
	}
}

// FlowSchema validates a flowcontrol.apiserver.k8s.io/v1 FlowSchema as kube-apiserver's
// ValidateFlowSchema: a DNS-subdomain name; matchingPrecedence in 1..10000, 1 only for "exempt"; a
// distinguisherMethod ByUser or ByNamespace; a priorityLevelConfiguration name; each rule with subjects
// and resource or non-resource rules (verbs, groups, resources, namespaces, URLs as upstream); the
// mandatory schemas ("exempt", "catch-all") keep their fixed spec; status conditions have distinct types.
func FlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	errs := Subdomain(&fs.ObjectMeta)
	spec, p := &fs.Spec, field.NewPath("spec")
	switch mp := spec.MatchingPrecedence; {
	case mp <= 0:
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), mp, "must be a positive value"))
	case mp > maxMatchPrecedence:
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), mp, fmt.Sprintf("must not be greater than %v", maxMatchPrecedence)))
	case mp == 1 && fs.Name != flowcontrolv1.FlowSchemaNameExempt:
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), mp, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if d := spec.DistinguisherMethod; d != nil && !slices.Contains(flowDistinguishers, string(d.Type)) {
		errs = append(errs, field.NotSupported(p.Child("distinguisherMethod", "type"), d.Type, flowDistinguishers))
	}
	if n := spec.PriorityLevelConfiguration.Name; n == "" {
		errs = append(errs, field.Required(p.Child("priorityLevelConfiguration", "name"), "must reference a priority level"))
	} else {
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(p.Child("priorityLevelConfiguration", "name"), n, msg))
		}
	}
	for i := range spec.Rules {
		errs = append(errs, flowRule(&spec.Rules[i], p.Child("rules").Index(i))...)
	}
	if mand, ok := mandatoryFlows[fs.Name]; ok && !apiequality.Semantic.DeepEqual(fs.Spec, mand.Spec) {
		errs = append(errs, field.Invalid(p, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	return append(errs, FlowSchemaStatus(fs)...)
}

// FlowSchemaStatus checks that the status conditions have a type, each type once.
func FlowSchemaStatus(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	var types []string
	for _, c := range fs.Status.Conditions {
		types = append(types, string(c.Type))
	}
	return conditionTypes(types, field.NewPath("status", "conditions"))
}

func conditionTypes(types []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range types {
		if t == "" {
			errs = append(errs, field.Required(p.Index(i).Child("type"), ""))
		} else if seen[t] {
			errs = append(errs, field.Duplicate(p.Index(i).Child("type"), t))
		}
		seen[t] = true
	}
	return errs
}

func flowRule(r *flowcontrolv1.PolicyRulesWithSubjects, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Subjects) == 0 {
		errs = append(errs, field.Required(p.Child("subjects"), "subjects must contain at least one value"))
	}
	if len(r.ResourceRules) == 0 && len(r.NonResourceRules) == 0 {
		errs = append(errs, field.Required(p, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range r.Subjects {
		errs = append(errs, flowSubject(&r.Subjects[i], p.Child("subjects").Index(i))...)
	}
	for i, rr := range r.ResourceRules {
		rp := p.Child("resourceRules").Index(i)
		errs = append(errs, flowVerbsErrs(rr.Verbs, rp.Child("verbs"))...)
		errs = append(errs, wildcardList(rr.APIGroups, rp.Child("apiGroups"), "resource rules must supply at least one api group", "api groups")...)
		errs = append(errs, wildcardList(rr.Resources, rp.Child("resources"), "resource rules must supply at least one resource", "resources")...)
		if len(rr.Namespaces) == 0 && !rr.ClusterScope {
			errs = append(errs, field.Required(rp.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
		} else if slices.Contains(rr.Namespaces, flowcontrolv1.NamespaceEvery) {
			if len(rr.Namespaces) > 1 {
				errs = append(errs, field.Invalid(rp.Child("namespaces"), rr.Namespaces, "if '*' is present, must not specify other namespaces"))
			}
		} else {
			for j, ns := range rr.Namespaces {
				for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
					errs = append(errs, field.Invalid(rp.Child("namespaces").Index(j), ns, "each member of this list must be '*' or a DNS-1123 label; "+msg))
				}
			}
		}
	}
	for i, nr := range r.NonResourceRules {
		np := p.Child("nonResourceRules").Index(i)
		errs = append(errs, flowVerbsErrs(nr.Verbs, np.Child("verbs"))...)
		if len(nr.NonResourceURLs) == 0 {
			errs = append(errs, field.Required(np.Child("nonResourceURLs"), "nonResourceURLs must contain at least one value"))
		} else if slices.Contains(nr.NonResourceURLs, "*") {
			if len(nr.NonResourceURLs) > 1 {
				errs = append(errs, field.Invalid(np.Child("nonResourceURLs"), nr.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
			}
		} else {
			for j, u := range nr.NonResourceURLs {
				if msg := nonResourceURL(u); msg != "" {
					errs = append(errs, field.Invalid(np.Child("nonResourceURLs").Index(j), u, msg))
				}
			}
		}
	}
	return errs
}

// nonResourceURL is upstream's ValidateNonResourceURLPath: a path from "/", no white space, no "//",
// "*" only as the last segment.
func nonResourceURL(u string) string {
	switch {
	case u == "":
		return "must not be empty"
	case u == "/":
		return ""
	case !strings.HasPrefix(u, "/"):
		return "must start with slash"
	case strings.ContainsAny(u, " \t\n"):
		return "must not contain white-space"
	case strings.Contains(u, "//"):
		return "must not contain double slash"
	case strings.Contains(u, "*") && !strings.HasSuffix(u, "/*"):
		return "wildcard can only do suffix matching"
	}
	return ""
}

func flowVerbsErrs(verbs []string, p *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	case slices.Contains(verbs, flowcontrolv1.VerbAll):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(p, verbs, "if '*' is present, must not specify other verbs")}
		}
		return nil
	}
	for _, v := range verbs {
		if !slices.Contains(flowVerbs, v) {
			return field.ErrorList{field.NotSupported(p, verbs, flowVerbs)}
		}
	}
	return nil
}

func wildcardList(items []string, p *field.Path, required, what string) field.ErrorList {
	if len(items) == 0 {
		return field.ErrorList{field.Required(p, required)}
	}
	if slices.Contains(items, "*") && len(items) > 1 {
		return field.ErrorList{field.Invalid(p, items, "if '*' is present, must not specify other "+what)}
	}
	return nil
}

func flowSubject(s *flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, f, kind string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(f), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", f, kind)))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		forbid(s.User != nil, "user", "User")
		forbid(s.Group != nil, "group", "Group")
		sp := p.Child("serviceAccount")
		switch {
		case s.ServiceAccount == nil:
			errs = append(errs, field.Required(sp, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		default:
			if s.ServiceAccount.Name == "" {
				errs = append(errs, field.Required(sp.Child("name"), ""))
			} else if s.ServiceAccount.Name != flowcontrolv1.NameAll {
				for _, msg := range apimachineryvalidation.ValidateServiceAccountName(s.ServiceAccount.Name, false) {
					errs = append(errs, field.Invalid(sp.Child("name"), s.ServiceAccount.Name, msg))
				}
			}
			if s.ServiceAccount.Namespace == "" {
				errs = append(errs, field.Required(sp.Child("namespace"), "must specify namespace for service account"))
			} else {
				for _, msg := range apimachineryvalidation.ValidateNamespaceName(s.ServiceAccount.Namespace, false) {
					errs = append(errs, field.Invalid(sp.Child("namespace"), s.ServiceAccount.Namespace, msg))
				}
			}
		}
	case flowcontrolv1.SubjectKindUser:
		forbid(s.Group != nil, "group", "Group")
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		if s.User == nil {
			errs = append(errs, field.Required(p.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(p.Child("user", "name"), ""))
		}
	case flowcontrolv1.SubjectKindGroup:
		forbid(s.User != nil, "user", "User")
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		if s.Group == nil {
			errs = append(errs, field.Required(p.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(p.Child("group", "name"), ""))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, flowSubjectKinds))
	}
	return errs
}

// PriorityLevelConfiguration validates a flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfiguration as
// kube-apiserver's: type Exempt exactly for the one named "exempt", else Limited with its limited block
// (nominalConcurrencyShares >= 0, lendablePercent 0..100, borrowingLimitPercent >= 0, a limitResponse
// of Reject, or Queue with queues 1..10^7, handSize 1..queues and <= 60 entropy bits, queueLengthLimit >
// 0); the mandatory levels keep their fixed spec ("exempt" may change spec.exempt); status conditions
// have distinct types.
func PriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	errs := Subdomain(&pl.ObjectMeta)
	spec, p := &pl.Spec, field.NewPath("spec")
	if (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) != (pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt) {
		errs = append(errs, field.Invalid(p.Child("type"), spec.Type, "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(p.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			errs = append(errs, shares(e.NominalConcurrencyShares, e.LendablePercent, p.Child("exempt"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(p.Child("exempt"), "must be nil if the type is Limited"))
		}
		if spec.Limited == nil {
			errs = append(errs, field.Required(p.Child("limited"), "must not be empty when type is Limited"))
		} else {
			errs = append(errs, limited(spec.Limited, p.Child("limited"))...)
		}
	case "":
		errs = append(errs, field.Required(p.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), spec.Type, priorityLevelTypes))
	}
	if mand, ok := mandatoryPriorities[pl.Name]; ok {
		have := pl.Spec.DeepCopy()
		msg := fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)
		if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
			have.Exempt = mand.Spec.Exempt
			msg = fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name)
		}
		if !apiequality.Semantic.DeepEqual(&mand.Spec, have) {
			errs = append(errs, field.Invalid(p, pl.Spec, msg))
		}
	}
	return append(errs, PriorityLevelConfigurationStatus(pl)...)
}

// PriorityLevelConfigurationStatus checks that the status conditions have a type, each type once.
func PriorityLevelConfigurationStatus(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var types []string
	for _, c := range pl.Status.Conditions {
		types = append(types, string(c.Type))
	}
	return conditionTypes(types, field.NewPath("status", "conditions"))
}

func shares(nominal, lendable *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if nominal != nil && *nominal < 0 {
		errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *nominal, "must be a non-negative integer"))
	}
	if lendable != nil && (*lendable < 0 || *lendable > 100) {
		errs = append(errs, field.Invalid(p.Child("lendablePercent"), *lendable, "must be between 0 and 100, inclusive"))
	}
	return errs
}

func limited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, p *field.Path) field.ErrorList {
	errs := shares(l.NominalConcurrencyShares, l.LendablePercent, p)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(p.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	lr, lp := l.LimitResponse, p.Child("limitResponse")
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			errs = append(errs, field.Forbidden(lp.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		q, qp := lr.Queuing, lp.Child("queuing")
		if q == nil {
			return append(errs, field.Required(qp, "must not be empty if limited.limitResponse.type is Limited"))
		}
		if q.QueueLengthLimit <= 0 {
			errs = append(errs, field.Invalid(qp.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
		}
		if q.Queues <= 0 {
			errs = append(errs, field.Invalid(qp.Child("queues"), q.Queues, "must be positive"))
		} else if q.Queues > maxQueues {
			errs = append(errs, field.Invalid(qp.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
		}
		switch {
		case q.HandSize <= 0:
			errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, "must be positive"))
		case q.HandSize > q.Queues:
			errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
		case shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)) > shufflesharding.MaxHashBits:
			errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
		}
	case "":
		errs = append(errs, field.Required(lp.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(lp.Child("type"), lr.Type, limitResponseTypes))
	}
	return errs
}
