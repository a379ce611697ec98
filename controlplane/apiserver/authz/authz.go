// Package authz decides who may do what. Members of system:masters may do everything. Nodes — users
// system:node:<name> in group system:nodes — are decided by the Node authorizer (package node); which
// node, pod and lease a node may change is narrowed by the NodeRestriction admission plugin (package
// admission). Bootstrap-token users (group
// system:bootstrappers) may do what Kubernetes' system:node-bootstrapper ClusterRole allows: create, get,
// list and watch CertificateSigningRequests (plus discovery and health, like system:discovery). Anonymous
// users may get the ConfigMap kube-public/cluster-info (kubeadm's bootstrap-signer role) and the health
// and version endpoints (system:public-info-viewer). Everyone else is denied (403).
package authz

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/nodekit/nodekit/controlplane/apiserver/authz/node"
)

// Well-known identities.
const (
	MastersGroup = user.SystemPrivilegedGroup // system:masters
	NodesGroup   = user.NodesGroup            // system:nodes
	// BootstrappersGroup is the group of every bootstrap-token user (system:bootstrap:<token id>).
	BootstrappersGroup = "system:bootstrappers"
	// ClusterInfoNamespace and ClusterInfoName locate kubeadm's discovery ConfigMap, which anonymous
	// users may read.
	ClusterInfoNamespace = "kube-public"
	ClusterInfoName      = "cluster-info"
)

// Authorizer implements authorizer.Authorizer with the rules above; Node decides for nodes (package
// node, the Node authorizer).
type Authorizer struct {
	Node authorizer.Authorizer
}

// bootstrapperRules: what system:node-bootstrapper allows.
var bootstrapperRules = map[string][]string{
	"certificates.k8s.io/certificatesigningrequests": {"create", "get", "list", "watch"},
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
	if _, ok := node.Identity(u); ok {
		if !a.IsResourceRequest() {
			return discovery(a, "nodes")
		}
		return z.Node.Authorize(ctx, a)
	}
	if slices.Contains(u.GetGroups(), BootstrappersGroup) {
		if !a.IsResourceRequest() {
			return discovery(a, "bootstrappers")
		}
		return byRules(a, bootstrapperRules, "bootstrap user "+u.GetName())
	}
	if slices.Contains(u.GetGroups(), user.AllUnauthenticated) {
		return anonymous(a)
	}
	return authorizer.DecisionNoOpinion, "user " + u.GetName() + " has no permissions", nil
}

// discovery allows GET of the discovery, OpenAPI, health and version endpoints (system:discovery,
// system:public-info-viewer) and denies every other non-resource request.
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

// anonymous allows unauthenticated users to get the health and version endpoints and the cluster-info
// ConfigMap in kube-public (by name: no list or watch), nothing else.
func anonymous(a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetVerb() != "get" {
		return authorizer.DecisionDeny, "anonymous users may only get cluster-info", nil
	}
	if !a.IsResourceRequest() {
		switch a.GetPath() {
		case "/healthz", "/readyz", "/livez", "/version", "/version/":
			return authorizer.DecisionAllow, "", nil
		}
	} else if a.GetAPIGroup() == "" && a.GetResource() == "configmaps" && a.GetSubresource() == "" &&
		a.GetNamespace() == ClusterInfoNamespace && a.GetName() == ClusterInfoName {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, "anonymous users may only get configmap " + ClusterInfoNamespace + "/" + ClusterInfoName, nil
}
