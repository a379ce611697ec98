package teardown

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/coreos/go-iptables/iptables"
	"github.com/vishvananda/netlink"

	"github.com/nodekit/nodekit/cni/bridge"
	"github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/cni/ipam"
	"github.com/nodekit/nodekit/cni/masq"
	"github.com/nodekit/nodekit/cni/netconf"
	"github.com/nodekit/nodekit/cni/portmap"
	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/cni/vxlan"
)

// node is a pod network set up as the agent and the plugin set it up, in a fresh network namespace:
// the conflist, the bridge, the masquerade and hostport chains, and an IPAM store with one allocation.
type node struct {
	ns            ns.NetNS
	conf          config.Options
	allocatedIP   net.IP
	confDir, ipam string
}

func setUp(t *testing.T, ipamDir string) *node {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces, iptables)")
	}
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Close(); _ = testutils.UnmountNS(netns) })
	n := &node{ns: netns, confDir: t.TempDir(), ipam: ipamDir}
	n.conf = config.Options{Path: filepath.Join(n.confDir, "10-nodekit.conflist"), NetworkName: "nk-teardown", PodCIDR: "10.231.4.0/24",
		ClusterCIDR: "10.231.0.0/16", Bridge: "nktd0", DataDir: ipamDir}
	if _, err := config.Write(n.conf); err != nil {
		t.Fatal(err)
	}
	_, pod, _ := net.ParseCIDR(n.conf.PodCIDR)
	_, cluster, _ := net.ParseCIDR(n.conf.ClusterCIDR)
	err = netns.Do(func(ns.NetNS) error {
		gw := &net.IPNet{IP: net.ParseIP("10.231.4.1").To4(), Mask: pod.Mask}
		if _, err := bridge.EnsureBridge(n.conf.Bridge, netconf.DefaultMTU, []*net.IPNet{gw}); err != nil {
			return err
		}
		ipt, err := iptables.New()
		if err != nil {
			return err
		}
		if err := masq.Ensure(ipt, n.conf.NetworkName, []*net.IPNet{pod}, cluster); err != nil {
			return err
		}
		// A host-gw route to another node's pods, and one of another cluster (outside the cluster CIDR),
		// through the node's link to the other nodes (a bridge of another name here, which teardown leaves alone).
		la := netlink.NewLinkAttrs()
		la.Name = "nktdeth0"
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return err
		}
		eth, err := netlink.LinkByName(la.Name)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(eth, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(192, 168, 77, 1), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(eth); err != nil {
			return err
		}
		for _, dst := range []string{"10.231.9.0/24", "10.232.9.0/24"} {
			_, d, _ := net.ParseCIDR(dst)
			if err := netlink.RouteAdd(&netlink.Route{Dst: d, Gw: net.IPv4(192, 168, 77, 9), Protocol: routes.Protocol}); err != nil {
				return fmt.Errorf("route %s: %w", dst, err)
			}
		}
		// The vxlan backend's device on that link.
		if _, err := vxlan.Ensure(vxlan.Device{VNI: vxlan.DefaultVNI, Port: vxlan.DefaultPort, LocalIP: net.IPv4(192, 168, 77, 1)}); err != nil {
			return err
		}
		// A pod mapped a host port and went away: its own chain is gone, the network's stay.
		if err := portmap.Add(ipt, n.conf.NetworkName, "c1", "eth0", net.ParseIP("10.231.4.2"), []netconf.PortMapping{{HostPort: 8080, ContainerPort: 80}}); err != nil {
			return err
		}
		return portmap.Remove(ipt, n.conf.NetworkName, "c1", "eth0")
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := ipam.Open(ipamDir, n.conf.NetworkName, []ipam.Range{{Subnet: *pod, Start: net.ParseIP("10.231.4.2").To4(), End: net.ParseIP("10.231.4.254").To4()}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := store.Allocate("c2", "eth0", "")
	if err != nil {
		t.Fatal(err)
	}
	n.allocatedIP = a.IP
	return n
}

// state reports what of the network is left in the namespace and on disk.
func (n *node) state(t *testing.T) (bridge, masqChain, hostportChain, conflist, store bool) {
	t.Helper()
	err := n.ns.Do(func(ns.NetNS) error {
		_, err := netlink.LinkByName(n.conf.Bridge)
		bridge = err == nil
		ipt, err := iptables.New()
		if err != nil {
			return err
		}
		if masqChain, err = ipt.ChainExists("nat", masq.ChainName(n.conf.NetworkName)); err != nil {
			return err
		}
		hostportChain, err = ipt.ChainExists("nat", portmap.TopChain(n.conf.NetworkName))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(n.conf.Path)
	conflist = err == nil
	_, err = os.Stat(ipam.Dir(n.ipam, n.conf.NetworkName))
	store = err == nil
	return
}

// routes reports whether the node's host-gw route (inside the cluster CIDR) and the other cluster's
// nodekit route are in its namespace.
func (n *node) routes(t *testing.T) (ours, foreign bool) {
	t.Helper()
	err := n.ns.Do(func(ns.NetNS) error {
		rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routes.Protocol}, netlink.RT_FILTER_PROTOCOL)
		for _, r := range rs {
			ours = ours || r.Dst.String() == "10.231.9.0/24"
			foreign = foreign || r.Dst.String() == "10.232.9.0/24"
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ours, foreign
}

// vxlanDevice reports whether the vxlan backend's device is in the node's namespace.
func (n *node) vxlanDevice(t *testing.T) bool {
	t.Helper()
	found := false
	err := n.ns.Do(func(ns.NetNS) error {
		_, err := netlink.LinkByName(vxlan.DeviceName(vxlan.DefaultVNI))
		found = err == nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func (n *node) teardown(t *testing.T, o Options) {
	t.Helper()
	o.ConfList = n.conf.Path
	if err := n.ns.Do(func(ns.NetNS) error { return Network(o) }); err != nil {
		t.Fatalf("Network(%+v): %v", o, err)
	}
}

func TestNetwork(t *testing.T) {
	for _, tc := range []struct {
		name string
		// purge and owned: Options.Purge, and whether the IPAM store lies under Options.OwnedDir.
		purge, owned bool
		// left: what must remain (the bridge and the chains never do).
		conflistLeft, storeLeft bool
	}{
		{"down keeps the config and the store", false, true, true, true},
		{"purge removes the store it owns", true, true, false, false},
		{"purge keeps a shared store that holds allocations", true, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			ipamDir := filepath.Join(dataDir, "cni")
			if !tc.owned {
				ipamDir = t.TempDir()
			}
			n := setUp(t, ipamDir)
			if br, mc, hc, cl, st := n.state(t); !br || !mc || !hc || !cl || !st {
				t.Fatalf("set-up incomplete: bridge %v masq %v hostports %v conflist %v store %v", br, mc, hc, cl, st)
			}
			if ours, foreign := n.routes(t); !ours || !foreign {
				t.Fatalf("set-up incomplete: host-gw route %v, other cluster's route %v", ours, foreign)
			}
			if !n.vxlanDevice(t) {
				t.Fatal("set-up incomplete: no vxlan device")
			}
			n.teardown(t, Options{Purge: tc.purge, OwnedDir: dataDir})
			if n.vxlanDevice(t) {
				t.Error("vxlan device left")
			}
			if ours, foreign := n.routes(t); ours || !foreign {
				t.Errorf("host-gw route left %v (want false), other cluster's route left %v (want true)", ours, foreign)
			}
			br, mc, hc, cl, st := n.state(t)
			if br || mc || hc {
				t.Errorf("left behind: bridge %v, masquerade chain %v, hostport chain %v", br, mc, hc)
			}
			if cl != tc.conflistLeft || st != tc.storeLeft {
				t.Errorf("conflist left %v (want %v), IPAM store left %v (want %v)", cl, tc.conflistLeft, st, tc.storeLeft)
			}
			// Idempotent: a second run finds nothing to remove and no error.
			n.teardown(t, Options{Purge: tc.purge, OwnedDir: dataDir})
		})
	}
}

func TestNetworkPurgeRemovesAnEmptySharedStore(t *testing.T) {
	n := setUp(t, t.TempDir())
	store, err := ipam.Open(n.ipam, n.conf.NetworkName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Release("c2", "eth0"); err != nil {
		t.Fatal(err)
	}
	n.teardown(t, Options{Purge: true, OwnedDir: t.TempDir()})
	if _, _, _, cl, st := n.state(t); cl || st {
		t.Fatalf("conflist left %v, empty shared IPAM store left %v: want both removed", cl, st)
	}
}

func TestNetworkWithoutConflistUsesDefaults(t *testing.T) {
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { netns.Close(); _ = testutils.UnmountNS(netns) }()
	err = netns.Do(func(ns.NetNS) error {
		if _, err := bridge.EnsureBridge(netconf.DefaultBridge, netconf.DefaultMTU, nil); err != nil {
			return err
		}
		if err := Network(Options{ConfList: filepath.Join(t.TempDir(), "missing.conflist")}); err != nil {
			return err
		}
		if _, err := netlink.LinkByName(netconf.DefaultBridge); err == nil {
			t.Errorf("default bridge %s still exists", netconf.DefaultBridge)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
