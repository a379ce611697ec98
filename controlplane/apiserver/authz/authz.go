// Package authz decides who may do what. The API server's authorizer (New) is a union, evaluated in this
// order, the first Allow or Deny winning:
//
//  1. members of system:masters may do everything;
//  2. nodes — users system:node:<name> in group system:nodes, as Kubernetes' Node authorizer defines
//     them — may do what a kubelet and the service proxy need (the node rules below): read the objects a
//     node works from, register and update nodes, write pod status and events, manage node leases, review
//     tokens and access for the kubelet's own API. Which node and which pod a node may change is narrowed
//     by the NodeRestriction admission plugin (package admission);
//  3. RBAC (package authz/rbac) for everyone else: the Roles, ClusterRoles and bindings stored in
//     rbac.authorization.k8s.io/v1, including the bootstrap policy (package bootstrappolicy) that lets
//     bootstrap-token users request node certificates, anonymous users read kube-public/cluster-info and
//     the health and version endpoints, and every authenticated user use discovery.
//
// A request none of them allows is denied (403) with the reasons they gave.
package authz

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/union"

	"github.com/nodekit/nodekit/controlplane/apiserver/authz/rbac"
)

// Well-known identities.
const (
	MastersGroup   = user.SystemPrivilegedGroup // system:masters
	NodesGroup     = user.NodesGroup            // system:nodes
	NodeUserPrefix = "system:node:"
)

// New returns the API server's authorizer: system:masters, then the node rules (nodes), then RBAC.
func New(nodes Authorizer, rbacRules *rbac.Authorizer) (authorizer.Authorizer, error) {
	return union.New(
		union.NamedAuthorizer{AuthorizerName: "Privileged", Authorizer: authorizerfactory.NewPrivilegedGroups(MastersGroup)},
		union.NamedAuthorizer{AuthorizerName: "Node", Authorizer: authorizer.AuthorizerFunc(nodes.Authorize)},
		union.NamedAuthorizer{AuthorizerName: "RBAC", Authorizer: rbacRules.Authorizer()},
	)
}

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
	"events.k8s.io/events":            {"create", "update", "patch"},
	"/services":                       read,
	"/endpoints":                      read,
	"discovery.k8s.io/endpointslices": read,
	"networking.k8s.io/servicecidrs":  read,
	"/serviceaccounts":                read,
	"/namespaces":                     read,
	"coordination.k8s.io/leases":      {"get", "list", "watch", "create", "update", "patch", "delete"},
	"/serviceaccounts/token":          {"create"},
	// A kubelet renews its own client certificate through a CSR (the system:node ClusterRole).
	"certificates.k8s.io/certificatesigningrequests": {"create", "get", "list", "watch"},
	// A kubelet authenticates and authorizes callers of its own API (webhook mode).
	"authentication.k8s.io/tokenreviews":             {"create"},
	"authorization.k8s.io/subjectaccessreviews":      {"create"},
	"authorization.k8s.io/localsubjectaccessreviews": {"create"},
}

// Authorize allows nodes the rules above and denies them the rest; it has no opinion on other users.
// It never returns an error.
func (z Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionDeny, "no user", nil
	}
	if node, ok := NodeName(u); ok {
		if !a.IsResourceRequest() {
			return discovery(a, "nodes")
		}
		if a.GetAPIGroup() == "" && (a.GetResource() == "secrets" || a.GetResource() == "configmaps") && a.GetSubresource() == "" {
			return z.authorizeReference(ctx, a, node)
		}
		return byRules(a, nodeRules, "node "+u.GetName())
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// discovery allows GET of the discovery, OpenAPI, health and version endpoints (system:discovery,
// system:public-info-viewer) and denies every other non-resource request (nodes' discovery).
func discovery(a authorizer.Attributes, who string) (authorizer.Decision, string, error) {
	p := a.GetPath()
	if a.GetVerb() == "get" && (p == "/healthz" || p == "/readyz" || p == "/livez" || p == "/version" ||
		strings.HasPrefix(p, "/api") || strings.HasPrefix(p, "/openapi")) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, who + " may only read discovery and health endpoints", nil
}

// byRules allows a resource request whose group/resource[/subresource] and verb are in rules.
func byRules(a authorizer.Attributes, rules map[string][]string, who string) (authorizer.Decision, string, error) {
	key := a.GetAPIGroup() + "/" + a.GetResource()
	if sub := a.GetSubresource(); sub != "" {
		key += "/" + sub
	}
	if slices.Contains(rules[key], a.GetVerb()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, who + " may not " + a.GetVerb() + " " + key, nil
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
