// Package cni is the root of nodekit's pod networking (CNI spec 1.1.0). It holds no code; its
// subpackages each have one job:
//
//	netconf   parse and validate the plugin's network configuration (bad input → CNI error code + field)
//	ipam      on-disk, flock-protected allocation of pod IPs from the node's podCIDR ranges
//	bridge    node bridge + per-pod veth pair, pod address, default route, loopback, hairpin
//	masq      per-node egress masquerade (traffic leaving the cluster CIDR), nat chain NK-MASQ-*
//	portmap   hostPort DNAT in nat chains NK-HOSTPORTS-* / NK-HP-*
//	plugin    the ADD/DEL/CHECK/STATUS/GC handlers on skel (the binary is cmd/nodekit-cni)
//	config    the agent's conflist writer and the network-readiness check (libcni-validated)
//	routes    routes to other nodes' podCIDRs (host-gw, or onlink over the VXLAN device), from Node
//	          objects (the agent's route controller, podroutes, applies them; teardown removes them)
//	vxlan     the vxlan backend's device nodekit.<VNI> and its per-peer neighbour and FDB entries
//	          (flannel's vxlan; podroutes drives it, teardown deletes the device)
//	install   atomic install of the plugin executable into a CNI bin dir
//	cnitest   build-once plugin builder and a libcni-driven "runtime" for tests and benchmarks
//
// How the node agent uses it: at start-up install.Install(<nodekit-cni next to nodekit>, <CNI bin dir>);
// once the Node has spec.podCIDR, config.Write(config.Options{PodCIDR, ClusterCIDR, …}) and report the
// network ready only while config.Ready returns nil.
package cni
