// Package routes keeps the host-gw routes of a node: one route per other node, "<its podCIDR> via <its
// InternalIP>", so pods reach pods on other nodes of the same L2 segment without encapsulation. The agent
// derives the desired set from Node objects (FromNodes) on every node add/update/delete and applies it
// with Sync, which also removes routes of nodes that are gone.
//
// nodekit's routes carry their own routing protocol number (Protocol), which is how Sync tells them from
// routes it must not touch.
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

// Route sends PodCIDR via NodeIP.
type Route struct {
	PodCIDR *net.IPNet
	NodeIP  net.IP
}

func (r Route) String() string { return r.PodCIDR.String() + " via " + r.NodeIP.String() }

// FromNodes returns the routes to every node but self (matched by Node.Name) that has an IPv4 podCIDR
// (spec.podCIDRs, else spec.podCIDR) and an InternalIP address (status.addresses); other nodes are skipped,
// as they cannot be routed to yet. The result is sorted by podCIDR.
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
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			_, sn, err := net.ParseCIDR(c)
			if err != nil || sn.IP.To4() == nil || nodeIP == nil {
				continue
			}
			out = append(out, Route{PodCIDR: sn, NodeIP: nodeIP})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodCIDR.String() < out[j].PodCIDR.String() })
	return out
}

// Sync makes the calling thread's network namespace hold exactly the desired nodekit routes in the main
// table: missing ones are added (or replaced when the gateway changed) and nodekit routes not desired are
// deleted. Routes with another protocol are never touched. It returns how many routes it added and removed;
// on error it stops at the first route that failed (naming it), having applied the ones before.
func Sync(desired []Route) (added, removed int, err error) {
	have, err := netlinksafe.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: Protocol, Table: syscall.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return 0, 0, fmt.Errorf("routes: list: %w", err)
	}
	want := make(map[string]Route, len(desired))
	for _, r := range desired {
		if r.PodCIDR == nil || r.NodeIP.To4() == nil {
			return 0, 0, fmt.Errorf("routes: route %+v needs an IPv4 podCIDR and node IP", r)
		}
		want[r.PodCIDR.String()] = r
	}
	current := make(map[string]bool, len(have))
	for _, h := range have {
		if h.Dst == nil {
			continue
		}
		w, ok := want[h.Dst.String()]
		if ok && h.Gw.Equal(w.NodeIP) {
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
		rt := &netlink.Route{Dst: r.PodCIDR, Gw: r.NodeIP, Protocol: Protocol, Table: syscall.RT_TABLE_MAIN}
		if err := netlink.RouteReplace(rt); err != nil {
			return added, removed, fmt.Errorf("routes: add %s: %w", r, err)
		}
		added++
	}
	return added, removed, nil
}
