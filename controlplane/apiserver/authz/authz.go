// Package authz decides who may do what. Members of system:masters may do everything. Nodes — users
// system:node:<name> in group system:nodes, as Kubernetes' Node authorizer defines them — may do what a
// kubelet and the service proxy need: read the objects a node works from, register and update nodes, write
// pod status and events, manage node leases. Which node and which pod a node may change is narrowed by the
// NodeRestriction admission plugin (package admission). Everyone else is denied (403).
package authz

import (
	"context"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Well-known identities.
const (
	MastersGroup   = user.SystemPrivilegedGroup // system:masters
	NodesGroup     = user.NodesGroup            // system:nodes
	NodeUserPrefix = "system:node:"
)

// NodeName returns the node a user acts for ("" and false when the user is not a node).
func NodeName(u user.Info) (string, bool) {
	if u == nil || !strings.HasPrefix(u.GetName(), NodeUserPrefix) {
		return "", false
	}
	for _, g := range u.GetGroups() {
		if g == NodesGroup {
			name := strings.TrimPrefix(u.GetName(), NodeUserPrefix)
			return name, name != ""
		}
	}
	return "", false
}

// Authorizer implements authorizer.Authorizer with the rules above. A node may get a secret or a
// configmap only when a pod bound to it refers to it (PodsOnNode finds those pods); it may not list or
// watch them.
type Authorizer struct {
	PodsOnNode PodsOnNode
}

var read = []string{"get", "list", "watch"}

// nodeRules: resource (group/resource[/subresource]) → verbs a node may use.
var nodeRules = map[string][]string{
	"/nodes":                          {"get", "list", "watch", "create", "update", "patch", "delete"},
	"/nodes/status":                   {"get", "update", "patch"},
	"/pods":                           {"get", "list", "watch", "create", "delete"},
	"/pods/status":                    {"get", "update", "patch"},
	"/events":                         {"create", "update", "patch"},
	"/services":                       read,
	"/endpoints":                      read,
	"discovery.k8s.io/endpointslices": read,
	"/serviceaccounts":                read,
	"/namespaces":                     read,
	"coordination.k8s.io/leases":      {"get", "list", "watch", "create", "update", "patch", "delete"},
	"/serviceaccounts/token":          {"create"},
}

// Authorize allows masters everything and nodes the rules above; it never returns an error.
func (z Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionDeny, "no user", nil
	}
	for _, g := range u.GetGroups() {
		if g == MastersGroup {
			return authorizer.DecisionAllow, "", nil
		}
	}
	if node, ok := NodeName(u); ok {
		if !a.IsResourceRequest() {
			p := a.GetPath()
			if a.GetVerb() == "get" && (p == "/healthz" || p == "/readyz" || p == "/livez" || p == "/version" ||
				strings.HasPrefix(p, "/api") || strings.HasPrefix(p, "/openapi")) {
				return authorizer.DecisionAllow, "", nil
			}
			return authorizer.DecisionDeny, "nodes may only read discovery and health endpoints", nil
		}
		if a.GetAPIGroup() == "" && (a.GetResource() == "secrets" || a.GetResource() == "configmaps") && a.GetSubresource() == "" {
			return z.authorizeReference(ctx, a, node)
		}
		key := a.GetAPIGroup() + "/" + a.GetResource()
		if sub := a.GetSubresource(); sub != "" {
			key += "/" + sub
		}
		for _, v := range nodeRules[key] {
			if v == a.GetVerb() {
				return authorizer.DecisionAllow, "", nil
			}
		}
		return authorizer.DecisionDeny, "node " + u.GetName() + " may not " + a.GetVerb() + " " + key, nil
	}
	return authorizer.DecisionNoOpinion, "user " + u.GetName() + " has no permissions", nil
}

// authorizeReference allows a node to get a secret or configmap a pod bound to it refers to.
func (z Authorizer) authorizeReference(ctx context.Context, a authorizer.Attributes, node string) (authorizer.Decision, string, error) {
	what := a.GetResource() + " " + a.GetNamespace() + "/" + a.GetName()
	if a.GetVerb() != "get" || a.GetName() == "" || z.PodsOnNode == nil {
		return authorizer.DecisionDeny, "node " + node + " may only get " + a.GetResource() + " its pods refer to", nil
	}
	pods, err := z.PodsOnNode(ctx, a.GetNamespace(), node)
	if err != nil {
		return authorizer.DecisionDeny, "", err
	}
	if referencedBy(pods, a.GetResource(), a.GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, "no pod bound to node " + node + " refers to " + what, nil
}
