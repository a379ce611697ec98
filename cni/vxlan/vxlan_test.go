package vxlan

import (
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

// TestDevice runs in a fresh netns on the real kernel: the device is made with the settings and the MTU
// and MAC derived from the underlying interface and node IP, kept as it is by a second Ensure, re-created
// when its VNI differs; the peers' neighbour and forwarding entries are added, follow a moved node IP and
// go with the peer; Teardown deletes the device.
func TestDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = testutils.UnmountNS(n) })
	local := net.IPv4(192, 168, 7, 1).To4()
	err = n.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = "up0", 1400
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "up1"}); err != nil {
			return err
		}
		up, _ := netlink.LinkByName("up0")
		if err := netlink.AddrAdd(up, &netlink.Addr{IPNet: &net.IPNet{IP: local, Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(up); err != nil {
			return err
		}
		if _, err := Ensure(Device{VNI: 1, Port: DefaultPort, LocalIP: net.IPv4(192, 168, 9, 9)}); err == nil {
			t.Error("Ensure with a node IP that is no local address: no error")
		}
		if _, err := Ensure(Device{VNI: 0, Port: DefaultPort, LocalIP: local}); err == nil {
			t.Error("Ensure with VNI 0: no error")
		}
		idx, err := Ensure(Device{VNI: 1, Port: DefaultPort, LocalIP: local})
		if err != nil {
			return err
		}
		l, err := netlink.LinkByIndex(idx)
		if err != nil {
			return err
		}
		vx, ok := l.(*netlink.Vxlan)
		if !ok || vx.Name != "nodekit.1" || vx.VxlanId != 1 || vx.Port != 8472 || !vx.SrcAddr.Equal(local) || vx.Learning ||
			vx.MTU != 1350 || vx.HardwareAddr.String() != "0e:6b:c0:a8:07:01" || vx.Flags&net.FlagUp == 0 {
			t.Fatalf("device %+v", l)
		}
		if again, err := Ensure(Device{VNI: 1, Port: DefaultPort, LocalIP: local}); err != nil || again != idx {
			t.Errorf("second Ensure = #%d %v, want the same device #%d", again, err, idx)
		}
		if err := SetAddress(idx, net.IPv4(10, 244, 1, 0)); err != nil {
			return err
		}
		if err := SetAddress(idx, net.IPv4(10, 244, 3, 0)); err != nil { // a new podCIDR: the old address goes
			return err
		}
		addrs, _ := netlink.AddrList(l, netlink.FAMILY_V4)
		if len(addrs) != 1 || addrs[0].IPNet.String() != "10.244.3.0/32" {
			t.Errorf("device addresses %v, want 10.244.3.0/32 only", addrs)
		}

		pa := Peer{Node: "a", VTEP: net.IPv4(10, 244, 2, 0), MAC: MAC(net.IPv4(192, 168, 7, 2)), NodeIP: net.IPv4(192, 168, 7, 2)}
		pb := Peer{Node: "b", VTEP: net.IPv4(10, 244, 4, 0), MAC: MAC(net.IPv4(192, 168, 7, 3)), NodeIP: net.IPv4(192, 168, 7, 3)}
		if add, rm, err := SyncPeers(idx, []Peer{pa, pb}); err != nil || add != 4 || rm != 0 {
			t.Fatalf("first SyncPeers = %d %d %v, want 4 added", add, rm, err)
		}
		if add, rm, err := SyncPeers(idx, []Peer{pa, pb}); err != nil || add != 0 || rm != 0 {
			t.Fatalf("repeated SyncPeers = %d %d %v, want no change", add, rm, err)
		}
		pa.NodeIP = net.IPv4(192, 168, 7, 20) // a's address moved: its forwarding entry follows
		if add, rm, err := SyncPeers(idx, []Peer{pa}); err != nil || add != 1 || rm != 3 {
			t.Fatalf("SyncPeers after b left and a moved = %d %d %v, want 1 added, 3 removed", add, rm, err)
		}
		neigh := entries(t, idx, netlink.FAMILY_V4)
		fdb := entries(t, idx, syscall.AF_BRIDGE)
		if len(neigh) != 1 || neigh["10.244.2.0"] != pa.MAC.String() || len(fdb) != 1 || fdb[pa.MAC.String()] != "192.168.7.20" {
			t.Errorf("entries: neighbours %v, forwarding %v", neigh, fdb)
		}

		// another VNI on the same name (an edited setting): re-created
		if err := netlink.LinkDel(l); err != nil {
			return err
		}
		la = netlink.NewLinkAttrs()
		la.Name = "nodekit.1"
		if err := netlink.LinkAdd(&netlink.Vxlan{LinkAttrs: la, VxlanId: 7, Port: DefaultPort, Learning: true}); err != nil {
			return err
		}
		if _, err := Ensure(Device{VNI: 1, Port: DefaultPort, LocalIP: local}); err != nil {
			return err
		}
		l, _ = netlink.LinkByName("nodekit.1")
		if vx, ok := l.(*netlink.Vxlan); !ok || vx.VxlanId != 1 || vx.Learning {
			t.Errorf("device with VNI 7 not re-created: %+v", l)
		}
		gone, err := Teardown()
		if err != nil || len(gone) != 1 || gone[0] != "nodekit.1" {
			t.Errorf("Teardown = %v %v", gone, err)
		}
		if _, err := netlink.LinkByName("nodekit.1"); err == nil {
			t.Error("nodekit.1 left after Teardown")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// entries lists the permanent entries of the device as key → value: neighbours IP → MAC, forwarding MAC → IP.
func entries(t *testing.T, index, family int) map[string]string {
	t.Helper()
	ns, err := netlink.NeighList(index, family)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range ns {
		if n.State&netlink.NUD_PERMANENT == 0 || n.IP == nil {
			continue
		}
		if family == syscall.AF_BRIDGE {
			out[n.HardwareAddr.String()] = n.IP.String()
		} else {
			out[n.IP.String()] = n.HardwareAddr.String()
		}
	}
	return out
}
