// Command nodekit-cni is nodekit's CNI plugin (CNI spec 1.1.0): a node bridge with a veth per pod, on-disk
// IPAM from the node's podCIDR, egress masquerade and hostPort mappings. The container runtime executes it
// for every ADD, DEL, CHECK, STATUS, GC and VERSION; the nodekit agent installs it into the CNI bin dir
// (cni/install) and writes its conflist (cni/config).
//
// It is a separate small executable rather than a mode of the nodekit binary because the runtime starts a
// new process for every pod network operation: this binary links only the CNI, netlink and iptables
// libraries, so its start-up is a small fraction of the ADD latency, where the nodekit binary would first
// initialise the Kubernetes, containerd and etcd packages it links.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nodekit/nodekit/cni/plugin"
)

func main() {
	skel.PluginMainFuncs(plugin.Funcs(), version.All, "nodekit-cni: nodekit's bridge CNI plugin (bridge, IPAM, portmap, masquerade, loopback)")
}
