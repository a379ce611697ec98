// Package podnet holds the defaults of the cluster's pod network that both halves of nodekit share: the
// server's controller manager cuts every Node's podCIDR from the cluster CIDR, and the agent writes the
// same range into the node's CNI conflist (traffic leaving it is masqueraded). A leaf, so that the node
// side and the control plane name one value without importing each other.
package podnet

// DefaultClusterCIDR is the pod network every node's podCIDR is cut from (kube-controller-manager's
// --cluster-cidr; flannel's default network).
const DefaultClusterCIDR = "10.244.0.0/16"

// RouteReaderRole names the bootstrap ClusterRole (and its ClusterRoleBinding to the group system:nodes)
// that lets every node get, list and watch all Node objects, which the agent's host-gw route controller
// needs and the Node authorizer (own Node only, upstream's AuthorizeNodeWithSelectors) does not give. The
// server installs both; on another API server the operator applies them (docs/access-control.md).
const RouteReaderRole = "system:nodekit:route-reader"
