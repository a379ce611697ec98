// Package authz decides who may do what. Members of system:masters may do everything. Nodes — users
// system:node:<name> in group system:nodes, as Kubernetes' Node authorizer defines them — may do what a
// kubelet and the service proxy need: read the objects a node works from, register and update nodes, write
// pod status and events, manage node leases. Which node and which pod a node may change is narrowed by the
// NodeRestriction admission plugin (package admission). Bootstrap-token users (group
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
)

// Well-known identities.
const (
	MastersGroup   = user.SystemPrivilegedGroup // system:masters
	NodesGroup     = user.NodesGroup            // system:nodes
	NodeUserPrefix = "system:node:"
	// BootstrappersGroup is the group of every bootstrap-token user (system:bootstrap:<token id>).
	BootstrappersGroup = "system:bootstrappers"
	// ClusterInfoNamespace and ClusterInfoName locate kubeadm's discovery ConfigMap, which anonymous
	// users may read.
	ClusterInfoNamespace = "kube-public"
	ClusterInfoName      = "cluster-info"
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
	if node, ok := NodeName(u); ok {
		if !a.IsResourceRequest() {
			return discovery(a, "nodes")
		}
		if a.GetAPIGroup() == "" && (a.GetResource() == "secrets" || a.GetResource() == "configmaps") && a.GetSubresource() == "" {
			return z.authorizeReference(ctx, a, node)
		}
		return byRules(a, nodeRules, "node "+u.GetName())
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
