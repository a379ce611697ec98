// Package routes keeps the host-gw routes of a node: one route per other node, "<its podCIDR> via <its
// InternalIP>", so pods reach pods on other nodes of the same L2 segment without encapsulation. The
// agent's route controller (podroutes) derives the desired set from Node objects (FromNodes), checks each
// gateway is on a directly connected network (Connected) and applies the set with Sync, which also removes
// routes of nodes that are gone; `nodekit down` removes them all (Sync with no routes, from cni/teardown).
//
// nodekit's routes carry their own routing protocol number (Protocol) and lie inside the cluster's pod
// network (Sync's scope): that is how Sync tells them from routes it must not touch.
package routes

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"syscall"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
)

// Protocol is the rtnetlink protocol number marking nodekit's routes (shown as "proto 78" by `ip route`).
const Protocol = netlink.RouteProtocol(78)

// Route sends PodCIDR, the pods of the Node named Node, via Gw: that node's InternalIP (host-gw), or its
// VTEP address on the device LinkIndex, with OnLink (vxlan: the next hop is not on any subnet of the
// device, the kernel takes it as directly reachable there). LinkIndex 0 lets the kernel choose the device.
type Route struct {
	PodCIDR   *net.IPNet
	Gw        net.IP
	Node      string
	LinkIndex int
	OnLink    bool
}

func (r Route) String() string {
	s := r.PodCIDR.String() + " via " + r.Gw.String()
	if r.LinkIndex != 0 {
		s += fmt.Sprintf(" dev #%d", r.LinkIndex)
	}
	if r.OnLink {
		s += " onlink"
	}
	return s
}

// matches reports whether the kernel's route h is r (gateway, and device and onlink flag when r sets them).
func (r Route) matches(h netlink.Route) bool {
	return h.Gw.Equal(r.Gw) && (r.LinkIndex == 0 || h.LinkIndex == r.LinkIndex) && (h.Flags&int(netlink.FLAG_ONLINK) != 0) == r.OnLink
}

// FromNodes returns the host-gw routes (Gw the InternalIP) to every node but self (matched by Node.Name)
// that has an IPv4 podCIDR (spec.podCIDRs, else spec.podCIDR) and an InternalIP address (status.addresses);
// other nodes are skipped, as they cannot be routed to yet. The result is sorted by podCIDR.
func FromNodes(self string, nodes []*corev1.Node) []Route {
	var out []Route
	for _, n := range nodes {
		if n == nil || n.Name == self {
			continue
		}
		var nodeIP net.IP
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip := net.ParseIP(a.Address).To4(); ip != nil {
					nodeIP = ip
					break
				}
			}
		}
		if nodeIP == nil {
			continue
		}
		for _, sn := range PodCIDRs(n) {
			out = append(out, Route{PodCIDR: sn, Gw: nodeIP, Node: n.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodCIDR.String() < out[j].PodCIDR.String() })
	return out
}

// PodCIDRs returns the node's valid IPv4 podCIDRs, from spec.podCIDRs, else spec.podCIDR.
func PodCIDRs(n *corev1.Node) []*net.IPNet {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	var out []*net.IPNet
	for _, c := range cidrs {
		if _, sn, err := net.ParseCIDR(c); err == nil && sn.IP.To4() != nil {
			out = append(out, sn)
		}
	}
	return out
}

// Connected reports whether ip is reachable without a gateway from the calling thread's network namespace
// (the kernel's route to it is a link route, as for an address on a directly connected network): the
// condition for using it as a host-gw next hop. A local address of this namespace is not connected.
func Connected(ip net.IP) (bool, error) {
	rs, err := netlink.RouteGet(ip)
	if errors.Is(err, syscall.ENETUNREACH) {
		return false, nil // no route at all: not connected either
	}
	if err != nil {
		return false, fmt.Errorf("routes: route to %s: %w", ip, err)
	}
	for _, r := range rs {
		if r.Gw == nil && r.Type != syscall.RTN_LOCAL && r.Scope != netlink.SCOPE_HOST {
			return true, nil
		}
	}
	return false, nil
}

// Sync makes the calling thread's network namespace hold exactly the desired nodekit routes in the main
// table: missing ones are added (or replaced when the gateway, device or onlink flag changed) and nodekit routes inside scope (the
// cluster's pod network) that are not desired are deleted. Routes with another protocol, or outside scope,
// are never touched; a desired route outside scope is an error. It returns how many routes it added and
// removed; on error it stops at the first route that failed (naming it), having applied the ones before.
func Sync(desired []Route, scope *net.IPNet) (added, removed int, err error) {
	if scope == nil || scope.IP.To4() == nil {
		return 0, 0, fmt.Errorf("routes: scope %v: want the cluster's IPv4 pod network", scope)
	}
	have, err := netlinksafe.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: Protocol, Table: syscall.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return 0, 0, fmt.Errorf("routes: list: %w", err)
	}
	want := make(map[string]Route, len(desired))
	for _, r := range desired {
		if r.PodCIDR == nil || r.Gw.To4() == nil {
			return 0, 0, fmt.Errorf("routes: route %+v needs an IPv4 podCIDR and gateway", r)
		}
		if !Within(r.PodCIDR, scope) {
			return 0, 0, fmt.Errorf("routes: route %s: podCIDR is not inside the cluster CIDR %s", r, scope)
		}
		want[r.PodCIDR.String()] = r
	}
	current := make(map[string]bool, len(have))
	for _, h := range have {
		if h.Dst == nil || !Within(h.Dst, scope) {
			continue
		}
		w, ok := want[h.Dst.String()]
		if ok && w.matches(h) {
			current[h.Dst.String()] = true
			continue
		}
		if ok {
			continue // replaced below
		}
		if err := netlink.RouteDel(&h); err != nil && !errors.Is(err, syscall.ESRCH) {
			return added, removed, fmt.Errorf("routes: delete %s: %w", h.Dst, err)
		}
		removed++
	}
	for _, r := range desired {
		if current[r.PodCIDR.String()] {
			continue
		}
		rt := &netlink.Route{Dst: r.PodCIDR, Gw: r.Gw, LinkIndex: r.LinkIndex, Protocol: Protocol, Table: syscall.RT_TABLE_MAIN}
		if r.OnLink {
			rt.Flags = int(netlink.FLAG_ONLINK)
		}
		if err := netlink.RouteReplace(rt); err != nil {
			return added, removed, fmt.Errorf("routes: add %s: %w", r, err)
		}
		added++
	}
	return added, removed, nil
}

// Within reports whether the network sub lies inside the network n (as a podCIDR inside the cluster CIDR).
func Within(sub, n *net.IPNet) bool {
	no, _ := n.Mask.Size()
	so, _ := sub.Mask.Size()
	return so >= no && n.Contains(sub.IP)
}
