package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// ConfirmNoEscalation returns nil when u already holds every rule in rules, cluster-wide or in namespace
// (Kubernetes' privilege-escalation check for creating or updating a role); otherwise an error naming the
// user, its groups and each rule it does not hold, as kube-apiserver words it.
func (z *Authorizer) ConfirmNoEscalation(u user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	owner, resolveErr := z.RulesFor(u, namespace)
	covers, missing := validation.Covers(owner, rules)
	if covers {
		return nil
	}
	var lines []string
	for _, m := range compact(missing) {
		lines = append(lines, compactString(m))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(lines, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", resolveErr)
	}
	return fmt.Errorf("%s", msg)
}

// compact merges rules that differ only in their verbs (Covers breaks rules down to one verb each), as
// kube-apiserver's CompactRules does for its message.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	index := map[string]int{}
	for _, r := range rules {
		key := fmt.Sprintf("%q|%q|%q|%q", r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs)
		if i, ok := index[key]; ok {
			for _, v := range r.Verbs {
				if !slices.Contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		index[key] = len(out)
		r.Verbs = slices.Clone(r.Verbs)
		out = append(out, r)
	}
	return out
}

// compactString renders one rule the way kube-apiserver's escalation message does:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// EscalationAllowed reports whether the user may write roles beyond its own rules: members of
// system:masters may, and so may a user az allows the "escalate" verb on the role's resource
// (roles or clusterroles, in namespace, by name), as upstream.
func EscalationAllowed(ctx context.Context, az authorizer.Authorizer, u user.Info, resource, namespace, name string) bool {
	return privileged(u) || allowed(ctx, az, u, "escalate", resource, namespace, name)
}

// BindAllowed reports whether the user may bind a role it does not hold: system:masters may, and so may
// a user az allows the "bind" verb on the referenced role (roles or clusterroles, by name). A
// RoleBinding's ClusterRole is checked in the binding's namespace, as upstream.
func BindAllowed(ctx context.Context, az authorizer.Authorizer, u user.Info, ref rbacv1.RoleRef, namespace string) bool {
	resource := "clusterroles"
	if ref.Kind == "Role" {
		resource = "roles"
	}
	return privileged(u) || allowed(ctx, az, u, "bind", resource, namespace, ref.Name)
}

func privileged(u user.Info) bool { return slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) }

func allowed(ctx context.Context, az authorizer.Authorizer, u user.Info, verb, resource, namespace, name string) bool {
	if az == nil {
		return false
	}
	d, _, _ := az.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: rbacv1.GroupName,
		APIVersion: "*", Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true})
	return d == authorizer.DecisionAllow
}
