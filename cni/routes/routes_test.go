package routes

import (
	"net"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, cidr, ip string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

func TestFromNodes(t *testing.T) {
	rs := FromNodes("me", []*corev1.Node{
		node("me", "10.244.0.0/24", "192.168.1.1"),
		node("b", "10.244.2.0/24", "192.168.1.3"),
		node("a", "10.244.1.0/24", "192.168.1.2"),
		node("no-ip", "10.244.3.0/24", ""),
		node("no-cidr", "", "192.168.1.5"),
		nil,
	})
	if len(rs) != 2 || rs[0].String() != "10.244.1.0/24 via 192.168.1.2" || rs[1].String() != "10.244.2.0/24 via 192.168.1.3" {
		t.Fatalf("FromNodes = %v", rs)
	}
}

// TestSync runs in a fresh netns: routes are added, a changed gateway is replaced, removed nodes' routes go,
// and a route of another protocol is left alone.
func TestSync(t *testing.T) {
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = testutils.UnmountNS(n) })
	err = n.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name = "br0"
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return err
		}
		d, _ := netlink.LinkByName("br0")
		if err := netlink.AddrAdd(d, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(192, 168, 1, 1), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(d); err != nil {
			return err
		}
		_, foreign, _ := net.ParseCIDR("172.16.0.0/16")
		if err := netlink.RouteAdd(&netlink.Route{Dst: foreign, Gw: net.IPv4(192, 168, 1, 9)}); err != nil {
			return err
		}
		// a nodekit-protocol route outside the cluster CIDR (another cluster's, on a shared host) is not ours
		_, other, _ := net.ParseCIDR("10.250.1.0/24")
		if err := netlink.RouteAdd(&netlink.Route{Dst: other, Gw: net.IPv4(192, 168, 1, 8), Protocol: Protocol}); err != nil {
			return err
		}
		for ip, want := range map[string]bool{"192.168.1.7": true, "192.168.1.1": false, "172.16.1.1": false, "10.99.0.1": false} {
			if got, err := Connected(net.ParseIP(ip)); err != nil || got != want {
				t.Errorf("Connected(%s) = %v %v, want %v", ip, got, err, want)
			}
		}
		_, scope, _ := net.ParseCIDR("10.244.0.0/16")
		if _, _, err := Sync([]Route{{PodCIDR: other, Gw: net.IPv4(192, 168, 1, 2)}}, scope); err == nil {
			t.Error("Sync of a route outside the cluster CIDR: no error")
		}
		all := []*corev1.Node{node("a", "10.244.1.0/24", "192.168.1.2"), node("b", "10.244.2.0/24", "192.168.1.3")}
		if add, rm, err := Sync(FromNodes("me", all), scope); err != nil || add != 2 || rm != 0 {
			t.Fatalf("first Sync = %d %d %v", add, rm, err)
		}
		if add, rm, err := Sync(FromNodes("me", all), scope); err != nil || add != 0 || rm != 0 {
			t.Fatalf("repeated Sync = %d %d %v, want no change", add, rm, err)
		}
		moved := []*corev1.Node{node("a", "10.244.1.0/24", "192.168.1.4")}
		if add, rm, err := Sync(FromNodes("me", moved), scope); err != nil || add != 1 || rm != 1 {
			t.Fatalf("Sync after b left and a moved = %d %d %v", add, rm, err)
		}
		rs, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		var ours, theirs int
		for _, r := range rs {
			switch {
			case r.Protocol == Protocol && r.Dst.String() == "10.250.1.0/24":
				theirs++ // outside the scope: kept, as it must be
			case r.Protocol == Protocol:
				ours++
				if r.Dst.String() != "10.244.1.0/24" || !r.Gw.Equal(net.IPv4(192, 168, 1, 4)) {
					t.Errorf("unexpected nodekit route %v", r)
				}
			case r.Dst != nil && r.Dst.String() == "172.16.0.0/16":
				theirs++
			}
		}
		if ours != 1 || theirs != 2 {
			t.Errorf("nodekit routes %d (want 1), foreign routes kept %d (want 2)", ours, theirs)
		}
		// vxlan's shape: via an address on no subnet of the device, onlink; it replaces the host-gw route
		br, err := netlink.LinkByName("br0")
		if err != nil {
			return err
		}
		_, a, _ := net.ParseCIDR("10.244.1.0/24")
		onlink := []Route{{PodCIDR: a, Gw: net.IPv4(10, 244, 1, 0), LinkIndex: br.Attrs().Index, OnLink: true}}
		if add, rm, err := Sync(onlink, scope); err != nil || add != 1 || rm != 0 {
			t.Fatalf("Sync to an onlink route = %d %d %v", add, rm, err)
		}
		if add, rm, err := Sync(onlink, scope); err != nil || add != 0 || rm != 0 {
			t.Fatalf("repeated onlink Sync = %d %d %v, want no change", add, rm, err)
		}
		rs, err = netlinksafe.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: a}, netlink.RT_FILTER_DST)
		if err != nil || len(rs) != 1 || rs[0].Flags&int(netlink.FLAG_ONLINK) == 0 || !rs[0].Gw.Equal(net.IPv4(10, 244, 1, 0)) {
			t.Errorf("onlink route: %v %v", rs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
