// Package conntrack removes stale UDP conntrack entries after a proxy sync, as kube-proxy does: UDP has no
// connection end, so a client that keeps sending to a Service would keep hitting the conntrack entry that
// DNATs to a removed endpoint (or that recorded the Service while it had no endpoint) until the entry times
// out. Both proxy backends call Stale after a successful sync and Delete with the result.
package conntrack

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/proxy/state"
)

// Stale returns conntrack filters for the UDP flows that the change from prev to cur leaves pointing at the
// wrong place (kube-proxy's conntrack cleanup):
//   - an endpoint used by a UDP service port in prev but not in cur: flows DNATed to it via the ClusterIP,
//     each external IP, or the NodePort;
//   - a UDP service port that had no endpoint in prev and has one in cur: flows to its ClusterIP, external
//     IPs and NodePort (they were recorded without DNAT while the port rejected).
//
// prev may be nil (first sync: nothing is stale).
func Stale(prev, cur *state.Snapshot) []netlink.CustomConntrackFilter {
	if prev == nil {
		return nil
	}
	old := udpPorts(prev)
	var out []netlink.CustomConntrackFilter
	for name, sp := range udpPorts(cur) {
		was, existed := old[name]
		now := used(sp)
		if !existed || len(used(was)) == 0 {
			if len(now) > 0 {
				out = append(out, serviceFilters(sp, nil)...)
			}
			continue
		}
		for ip := range used(was) {
			if !now[ip] {
				out = append(out, serviceFilters(was, net.IP(ip.AsSlice()))...)
			}
		}
	}
	for name, was := range old {
		if _, still := udpPorts(cur)[name]; still {
			continue
		}
		for ip := range used(was) {
			out = append(out, serviceFilters(was, net.IP(ip.AsSlice()))...)
		}
	}
	return out
}

// Delete removes the conntrack entries matching any of filters from the current network namespace and
// returns how many were deleted.
func Delete(filters []netlink.CustomConntrackFilter) (uint, error) {
	if len(filters) == 0 {
		return 0, nil
	}
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filters...)
	if err != nil {
		return n, fmt.Errorf("conntrack: delete stale UDP entries: %w", err)
	}
	return n, nil
}

func udpPorts(s *state.Snapshot) map[string]*state.ServicePort {
	m := map[string]*state.ServicePort{}
	for _, sp := range s.Ports {
		if sp.Protocol == v1.ProtocolUDP {
			m[sp.Name.String()] = sp
		}
	}
	return m
}

// used is the set of endpoint IPs a port sends traffic to through any of its entry points.
func used(sp *state.ServicePort) map[netip.Addr]bool {
	set := map[netip.Addr]bool{}
	for _, e := range sp.InternalEndpoints() {
		set[e.IP] = true
	}
	if sp.HasExternal() {
		for _, e := range sp.ExternalEndpoints() {
			set[e.IP] = true
		}
	}
	return set
}

// serviceFilters matches UDP flows to the port's ClusterIP, external IPs and NodePort; when endpoint is not
// nil, only those DNATed to it (the reply source is the endpoint).
func serviceFilters(sp *state.ServicePort, endpoint net.IP) []netlink.CustomConntrackFilter {
	mk := func(dst net.IP, nodePort uint16) netlink.CustomConntrackFilter {
		f := &netlink.ConntrackFilter{}
		_ = f.AddProtocol(unix.IPPROTO_UDP)
		if dst != nil {
			_ = f.AddIP(netlink.ConntrackOrigDstIP, dst)
		}
		if nodePort != 0 {
			_ = f.AddPort(netlink.ConntrackOrigDstPort, nodePort)
		}
		if endpoint != nil {
			_ = f.AddIP(netlink.ConntrackReplySrcIP, endpoint)
		}
		return f
	}
	out := []netlink.CustomConntrackFilter{mk(net.IP(sp.ClusterIP.AsSlice()), 0)}
	for _, ip := range sp.ExternalIPs {
		out = append(out, mk(net.IP(ip.AsSlice()), 0))
	}
	if sp.NodePort != 0 {
		out = append(out, mk(nil, uint16(sp.NodePort)))
	}
	return out
}
