// Package node is nodekit's Node authorizer, as upstream's (plugin/pkg/auth/authorizer/node): a
// kubelet (user system:node:<name> in group system:nodes) may read a Secret, ConfigMap, PVC or
// ServiceAccount, and request a token for a ServiceAccount, only while a pod bound to its node refers to
// it (the Graph, fed by a pod informer); it may read only its own Node and use only its own Lease in
// kube-node-lease; it may list and watch pods only with the field selector spec.nodeName=<its name>.
// Everything else a node may do is the static rule table of upstream's system:node ClusterRole, plus
// the reads of upstream's system:node-proxier role for the service proxy the agent runs in-process with
// the node's credentials. Which objects a node may create, change and delete is narrowed further by the
// NodeRestriction admission plugin (package admission).
//
// Requests from users that are not nodes get no opinion; requests a node may not make get no opinion
// with the reason (as upstream), so that a later authorizer (RBAC) may still allow them.
package node

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// UserPrefix is the user-name prefix of node identities (system:node:<name>).
const UserPrefix = "system:node:"

// Identity returns the node a user acts for, as upstream's node identifier: isNode when the user is in
// group system:nodes; name is "" when the user name does not start with system:node: (such a node is
// refused everything node-specific).
func Identity(u user.Info) (name string, isNode bool) {
	if u == nil || !slices.Contains(u.GetGroups(), user.NodesGroup) {
		return "", false
	}
	if !strings.HasPrefix(u.GetName(), UserPrefix) {
		return "", true
	}
	return strings.TrimPrefix(u.GetName(), UserPrefix), true
}

// Authorizer implements authorizer.Authorizer with the rules above over Graph.
type Authorizer struct {
	Graph *Graph
}

var _ authorizer.Authorizer = Authorizer{}

var read = []string{"get", "list", "watch"}

// staticRules: group/resource[/subresource] → verbs, for the resources the graph does not subdivide.
var staticRules = map[string][]string{
	"authentication.k8s.io/tokenreviews":             {"create"},
	"authorization.k8s.io/subjectaccessreviews":      {"create"},
	"authorization.k8s.io/localsubjectaccessreviews": {"create"},
	"/services":            read,
	"/events":              {"create", "update", "patch"},
	"events.k8s.io/events": {"create", "update", "patch"},
	"/endpoints":           read, // upstream system:node: get; list and watch: system:node-proxier
	"certificates.k8s.io/certificatesigningrequests": {"create", "get", "list", "watch"},
	"node.k8s.io/runtimeclasses":                     read,
	"storage.k8s.io/csidrivers":                      read,
	// system:node-proxier, for the in-process service proxy
	"discovery.k8s.io/endpointslices": read,
	"networking.k8s.io/servicecidrs":  read,
}

// Authorize decides a request as described in the package comment; it never returns an error.
func (z Authorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	node, isNode := Identity(a.GetUser())
	if !isNode {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if node == "" {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("unknown node for user %q", a.GetUser().GetName()), nil
	}
	if !a.IsResourceRequest() {
		return authorizer.DecisionNoOpinion, "", nil
	}
	verb, sub := a.GetVerb(), a.GetSubresource()
	if a.GetAPIGroup() == "" {
		switch a.GetResource() {
		case "secrets":
			return z.readNamespaced(node, Secret, a)
		case "configmaps":
			return z.readNamespaced(node, ConfigMap, a)
		case "persistentvolumeclaims":
			if verb != "get" || sub != "" {
				return authorizer.DecisionNoOpinion, "can only get individual resources of this type", nil
			}
			return z.related(node, PersistentVolumeClaim, a)
		case "persistentvolumes":
			if verb != "get" || sub != "" {
				return authorizer.DecisionNoOpinion, "can only get individual resources of this type", nil
			}
			return z.related(node, PersistentVolume, a)
		case "serviceaccounts":
			if verb == "get" && sub == "" {
				return z.readNamespaced(node, ServiceAccount, a)
			}
			if verb != "create" || a.GetName() == "" {
				return authorizer.DecisionNoOpinion, "can only create tokens for individual service accounts", nil
			}
			if sub != "token" {
				return authorizer.DecisionNoOpinion, "can only create token subresource of serviceaccount", nil
			}
			return z.related(node, ServiceAccount, a)
		case "nodes":
			return authorizeNode(node, a)
		case "pods":
			return z.authorizePod(node, a)
		}
	}
	if a.GetAPIGroup() == "coordination.k8s.io" && a.GetResource() == "leases" {
		return authorizeLease(node, a)
	}
	key := a.GetAPIGroup() + "/" + a.GetResource()
	if sub != "" {
		key += "/" + sub
	}
	if slices.Contains(staticRules[key], verb) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("node %q may not %s %s", node, verb, key), nil
}

// ConditionsAwareAuthorize is Authorize as a decision without conditions (the Node authorizer is not
// conditions-aware).
func (z Authorizer) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(z.Authorize(ctx, a))
}

// EvaluateConditions fails closed: the Node authorizer never returns conditions.
func (Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// readNamespaced allows get, list and watch of one named object (list and watch with the field selector
// metadata.name=<name>) that a pod bound to node refers to.
func (z Authorizer) readNamespaced(node string, kind Kind, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if !slices.Contains(read, a.GetVerb()) {
		return authorizer.DecisionNoOpinion, "can only read resources of this type", nil
	}
	if a.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, "cannot read subresource", nil
	}
	if a.GetNamespace() == "" {
		return authorizer.DecisionNoOpinion, "can only read namespaced object of this type", nil
	}
	return z.related(node, kind, a)
}

// related allows the request when the graph links the named object to node.
func (z Authorizer) related(node string, kind Kind, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetName() == "" {
		return authorizer.DecisionNoOpinion, "No Object name found", nil
	}
	if z.Graph != nil && z.Graph.Reaches(node, kind, a.GetNamespace(), a.GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node), nil
}

// authorizeNode: create, update and patch of nodes and update and patch of nodes/status (narrowed to
// the node's own by NodeRestriction); get, list and watch of its own Node only.
func authorizeNode(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetSubresource() {
	case "":
		switch a.GetVerb() {
		case "create", "update", "patch":
			return authorizer.DecisionAllow, "", nil
		case "get", "list", "watch":
			switch a.GetName() {
			case node:
				return authorizer.DecisionAllow, "", nil
			case "":
				return authorizer.DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return authorizer.DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.GetName()), nil
			}
		}
	case "status":
		switch a.GetVerb() {
		case "update", "patch":
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("node %q may not %s nodes/%s", node, a.GetVerb(), a.GetSubresource()), nil
}

// authorizePod: get of pods bound to node, list and watch with spec.nodeName=<node>, create and delete
// (mirror pods, narrowed by NodeRestriction), update and patch of pods/status.
func (z Authorizer) authorizePod(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetSubresource() {
	case "":
		switch a.GetVerb() {
		case "get":
			return z.podRelated(node, a)
		case "list", "watch":
			reqs, _ := a.GetFieldSelector()
			for _, r := range reqs {
				if r.Field == "spec.nodeName" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == node {
					return authorizer.DecisionAllow, "", nil
				}
			}
			if a.GetName() != "" {
				return z.podRelated(node, a)
			}
			return authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return authorizer.DecisionAllow, "", nil
		}
	case "status":
		switch a.GetVerb() {
		case "update", "patch":
			return authorizer.DecisionAllow, "", nil
		}
	case "eviction":
		if a.GetVerb() == "create" {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("node %q may not %s pods/%s", node, a.GetVerb(), a.GetSubresource()), nil
}

func (z Authorizer) podRelated(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetName() == "" {
		return authorizer.DecisionNoOpinion, "No Object name found", nil
	}
	if z.Graph != nil && z.Graph.PodOnNode(node, a.GetNamespace(), a.GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node), nil
}

// authorizeLease: get, create, update, patch and delete of the node's own Lease in kube-node-lease (the
// name of a create is checked by NodeRestriction).
func authorizeLease(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetVerb() {
	case "get", "create", "update", "patch", "delete":
	default:
		return authorizer.DecisionNoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if a.GetNamespace() != corev1.NamespaceNodeLease {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease), nil
	}
	if a.GetVerb() != "create" && a.GetName() != node {
		return authorizer.DecisionNoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return authorizer.DecisionAllow, "", nil
}
