// Package authz decides who may do what. The API server's authorizer (New) is a union, evaluated in this
// order, the first Allow or Deny winning, as kube-apiserver's --authorization-mode=Node,RBAC behind the
// privileged group:
//
//  1. members of system:masters may do everything;
//  2. nodes — users system:node:<name> in group system:nodes — are decided by the Node authorizer
//     (package node): what a kubelet needs for the pods bound to it (which node, pod and lease a node
//     may change is narrowed by the NodeRestriction admission plugin, package admission); it has no
//     opinion on anything else;
//  3. RBAC (package authz/rbac): the Roles, ClusterRoles and bindings stored in
//     rbac.authorization.k8s.io/v1, including the bootstrap policy (package bootstrappolicy) that lets
//     every authenticated user use discovery, bootstrap-token users request node certificates, and
//     anonymous users read kube-public/cluster-info and the health and version endpoints.
//
// A request none of them allows is denied (403) with the reasons they gave.
package authz

import (
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/union"

	"github.com/nodekit/nodekit/controlplane/apiserver/authz/rbac"
)

// Well-known identities.
const (
	MastersGroup = user.SystemPrivilegedGroup // system:masters
	NodesGroup   = user.NodesGroup            // system:nodes
)

// New returns the API server's authorizer: system:masters, then nodes (the Node authorizer), then RBAC.
func New(nodes authorizer.Authorizer, rbacRules *rbac.Authorizer) (authorizer.Authorizer, error) {
	return union.New(
		union.NamedAuthorizer{AuthorizerName: "Privileged", Authorizer: authorizerfactory.NewPrivilegedGroups(MastersGroup)},
		union.NamedAuthorizer{AuthorizerName: "Node", Authorizer: nodes},
		union.NamedAuthorizer{AuthorizerName: "RBAC", Authorizer: rbacRules.Authorizer()},
	)
}
