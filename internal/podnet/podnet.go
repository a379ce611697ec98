// Package podnet holds the defaults of the cluster's pod network that both halves of nodekit share: the
// server's controller manager cuts every Node's podCIDR from the cluster CIDR, and the agent writes the
// same range into the node's CNI conflist (traffic leaving it is masqueraded). A leaf, so that the node
// side and the control plane name one value without importing each other.
package podnet

// DefaultClusterCIDR is the pod network every node's podCIDR is cut from (kube-controller-manager's
// --cluster-cidr; flannel's default network).
const DefaultClusterCIDR = "10.244.0.0/16"
