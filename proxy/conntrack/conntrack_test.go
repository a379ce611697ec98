package conntrack

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/proxy/state"
)

func udp(cip string, nodePort int32, eps ...string) *state.ServicePort {
	sp := &state.ServicePort{
		Name:      state.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "dns"}, Port: "dns", Protocol: v1.ProtocolUDP},
		ClusterIP: netip.MustParseAddr(cip), Port: 53, Protocol: v1.ProtocolUDP, NodePort: nodePort,
	}
	for _, e := range eps {
		sp.Endpoints = append(sp.Endpoints, state.Endpoint{IP: netip.MustParseAddr(e), Port: 5353, Ready: true, Serving: true})
	}
	return sp
}

// flow is a UDP conntrack entry from client to dst:dport, DNATed to backend.
func flow(dst string, dport uint16, backend string) *netlink.ConntrackFlow {
	f := &netlink.ConntrackFlow{FamilyType: unix.AF_INET}
	f.Forward = netlink.IPTuple{SrcIP: net.ParseIP("10.244.1.50"), DstIP: net.ParseIP(dst), Protocol: unix.IPPROTO_UDP, SrcPort: 40000, DstPort: dport}
	f.Reverse = netlink.IPTuple{SrcIP: net.ParseIP(backend), DstIP: net.ParseIP("10.244.1.50"), Protocol: unix.IPPROTO_UDP, SrcPort: 5353, DstPort: 40000}
	return f
}

func matches(filters []netlink.CustomConntrackFilter, f *netlink.ConntrackFlow) bool {
	for _, flt := range filters {
		if flt.MatchConntrackFlow(f) {
			return true
		}
	}
	return false
}

func TestStale(t *testing.T) {
	prev := &state.Snapshot{Ports: []*state.ServicePort{udp("10.96.0.10", 30053, "10.244.1.1", "10.244.1.2")}}
	cur := &state.Snapshot{Ports: []*state.ServicePort{udp("10.96.0.10", 30053, "10.244.1.2", "10.244.1.3")}}
	f := Stale(prev, cur)
	for _, tc := range []struct {
		name string
		flow *netlink.ConntrackFlow
		want bool
	}{
		{"ClusterIP flow to the removed endpoint", flow("10.96.0.10", 53, "10.244.1.1"), true},
		{"NodePort flow to the removed endpoint", flow("10.201.0.2", 30053, "10.244.1.1"), true},
		{"flow to a kept endpoint", flow("10.96.0.10", 53, "10.244.1.2"), false},
		{"another service's flow", flow("10.96.0.99", 53, "10.244.1.1"), false},
	} {
		if got := matches(f, tc.flow); got != tc.want {
			t.Errorf("%s: deleted=%v, want %v", tc.name, got, tc.want)
		}
	}

	// From no endpoint to one: every flow to the Service goes (it was recorded while rejected).
	empty := &state.Snapshot{Ports: []*state.ServicePort{udp("10.96.0.10", 0)}}
	one := &state.Snapshot{Ports: []*state.ServicePort{udp("10.96.0.10", 0, "10.244.1.3")}}
	if !matches(Stale(empty, one), flow("10.96.0.10", 53, "10.96.0.10")) {
		t.Error("a Service that gained its first endpoint keeps its old flows")
	}
	// A removed Service: flows to its endpoints go.
	if !matches(Stale(prev, &state.Snapshot{}), flow("10.96.0.10", 53, "10.244.1.1")) {
		t.Error("a removed Service keeps its flows")
	}
	if Stale(nil, cur) != nil || len(Stale(cur, cur)) != 0 {
		t.Error("no change must delete nothing")
	}
}
