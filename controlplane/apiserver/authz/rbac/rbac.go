// Package rbac is the RBAC authorizer: it allows a request when a rule of a Role or ClusterRole bound to
// the requesting user (by a RoleBinding in the request's namespace or by a ClusterRoleBinding) matches
// the request, exactly as Kubernetes' RBAC authorizer evaluates rbac.authorization.k8s.io/v1 rules:
//
//   - verbs: the request's verb, or "*";
//   - apiGroups: the request's API group ("" is core), or "*";
//   - resources: "<resource>" or "<resource>/<subresource>" for a subresource request, "*" (every
//     resource and subresource), or "*/<subresource>" (that subresource of every resource);
//   - resourceNames: empty (any name) or a list containing the request's name;
//   - nonResourceURLs: the request's path, "*", or a prefix ending in "*" ("/healthz/*");
//   - subjects: a User by name, a Group the user is in, or a ServiceAccount by
//     system:serviceaccount:<namespace>:<name> (a RoleBinding's ServiceAccount subject without a
//     namespace means the binding's namespace).
//
// RBAC only allows: a request no rule matches gets no opinion (so the next authorizer, if any, decides;
// the API server then answers 403) and a reason listing any role that could not be resolved. Roles and
// bindings are read from client-go listers (the API server's own informers over its loopback client).
package rbac

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
)

// Authorizer evaluates RBAC rules from listers. All four are required.
type Authorizer struct {
	Roles               rbaclisters.RoleLister
	RoleBindings        rbaclisters.RoleBindingLister
	ClusterRoles        rbaclisters.ClusterRoleLister
	ClusterRoleBindings rbaclisters.ClusterRoleBindingLister
}

// Authorize allows a request some bound rule matches (reason "RBAC: allowed by <binding>"); otherwise it
// has no opinion, with the resolution errors (a binding to a missing role) as its reason.
func (z *Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser() == nil {
		return authorizer.DecisionNoOpinion, "RBAC: no user", nil
	}
	var allowedBy string
	var errs []error
	z.VisitRulesFor(a.GetUser(), a.GetNamespace(), func(source string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if RuleAllows(a, rule) {
			allowedBy = source
			return false
		}
		return true
	})
	if allowedBy != "" {
		return authorizer.DecisionAllow, "RBAC: allowed by " + allowedBy, nil
	}
	if len(errs) > 0 {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs)), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// Authorizer returns z as a k8s.io/apiserver authorizer.Authorizer.
func (z *Authorizer) Authorizer() authorizer.Authorizer {
	return authorizer.AuthorizerFunc(z.Authorize)
}

// RulesFor returns every rule bound to u cluster-wide and, when namespace is not empty, in namespace;
// the error aggregates bindings whose role could not be resolved (the rules are then incomplete).
func (z *Authorizer) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	z.VisitRulesFor(u, namespace, func(_ string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
		} else {
			rules = append(rules, *rule)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// VisitRulesFor calls visit with each rule bound to u: first those of ClusterRoleBindings, then, when
// namespace is not empty, those of the namespace's RoleBindings. source describes the binding
// (`ClusterRoleBinding "x" of ClusterRole "y" to User "z"`). A binding whose role cannot be resolved is
// visited once with err set. visit returns false to stop.
func (z *Authorizer) VisitRulesFor(u user.Info, namespace string, visit func(source string, rule *rbacv1.PolicyRule, err error) bool) {
	crbs, err := z.ClusterRoleBindings.List(labels.Everything())
	if err != nil && !visit("", nil, err) {
		return
	}
	for _, b := range crbs {
		i, ok := appliesTo(u, b.Subjects, "")
		if !ok {
			continue
		}
		rules, err := z.RoleRefRules(b.RoleRef, "")
		if err != nil {
			if !visit("", nil, err) {
				return
			}
			continue
		}
		src := fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(b.Subjects[i], ""))
		for j := range rules {
			if !visit(src, &rules[j], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	rbs, err := z.RoleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil && !visit("", nil, err) {
		return
	}
	for _, b := range rbs {
		i, ok := appliesTo(u, b.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := z.RoleRefRules(b.RoleRef, namespace)
		if err != nil {
			if !visit("", nil, err) {
				return
			}
			continue
		}
		src := fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Namespace+"/"+b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(b.Subjects[i], b.Namespace))
		for j := range rules {
			if !visit(src, &rules[j], nil) {
				return
			}
		}
	}
}

// RoleRefRules returns the rules of the Role (in namespace) or ClusterRole a binding in namespace ("" for
// a ClusterRoleBinding) refers to; the error is the lister's (NotFound for a missing role).
func (z *Authorizer) RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		r, err := z.Roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	case "ClusterRole":
		r, err := z.ClusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

func describeSubject(s rbacv1.Subject, bindingNamespace string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, ns+"/"+s.Name)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

func appliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i, s := range subjects {
		if appliesToUser(u, s, namespace) {
			return i, true
		}
	}
	return 0, false
}

func appliesToUser(u user.Info, s rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.GetName() == s.Name
	case rbacv1.GroupKind:
		return has(u.GetGroups(), s.Name)
	case rbacv1.ServiceAccountKind:
		ns := namespace
		if s.Namespace != "" {
			ns = s.Namespace
		}
		return ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName())
	}
	return false
}

// RuleAllows reports whether rule matches the request (see the package documentation).
func RuleAllows(a authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !hasOrAll(rule.Verbs, a.GetVerb(), rbacv1.VerbAll) {
		return false
	}
	if !a.IsResourceRequest() {
		return nonResourceURLMatches(rule.NonResourceURLs, a.GetPath())
	}
	resource := a.GetResource()
	if sub := a.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	return hasOrAll(rule.APIGroups, a.GetAPIGroup(), rbacv1.APIGroupAll) &&
		resourceMatches(rule.Resources, resource, a.GetSubresource()) &&
		(len(rule.ResourceNames) == 0 || has(rule.ResourceNames, a.GetName()))
}

func resourceMatches(ruleResources []string, combined, subresource string) bool {
	for _, r := range ruleResources {
		if r == rbacv1.ResourceAll || r == combined {
			return true
		}
		// "*/scale" matches the scale subresource of every resource
		if subresource != "" && r == "*/"+subresource {
			return true
		}
	}
	return false
}

func nonResourceURLMatches(ruleURLs []string, path string) bool {
	for _, u := range ruleURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}

func has(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func hasOrAll(set []string, s, all string) bool {
	for _, x := range set {
		if x == s || x == all {
			return true
		}
	}
	return false
}
