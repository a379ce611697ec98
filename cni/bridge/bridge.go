// Package bridge wires pods to the node bridge: the bridge itself (holding each range's gateway address),
// and per pod a veth pair whose pod end becomes the pod's interface (usually eth0) with its address and a
// default route via the gateway, and whose node end is a bridge port (hairpin optional).
//
// Functions taking no namespace act in the calling thread's network namespace (the node's).
package bridge

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/nodekit/nodekit/cni/internal/naming"
)

// HostVethName is the node-side veth name of (containerID, ifName): "nk" + 12 hex digits of a SHA-256,
// stable so DEL finds the interface without any saved state even when the pod netns is gone.
func HostVethName(containerID, ifName string) string {
	return naming.Hash("nk", 6, containerID, ifName)
}

// EnsureBridge creates the bridge name (if missing) with the given MTU, brings it up, and makes sure it
// holds every gateway address (gateway IP with its subnet's prefix length). It is idempotent and safe when
// several plugin processes race to create the same bridge.
func EnsureBridge(name string, mtu int, gateways []*net.IPNet) (*netlink.Bridge, error) {
	br, err := bridgeByName(name)
	if err != nil {
		if _, notFound := err.(netlink.LinkNotFoundError); !notFound {
			return nil, err
		}
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU, la.TxQLen = name, mtu, -1
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("bridge: create %s: %w", name, err)
		}
		// accept_ra etc. are left at their defaults; the bridge is IPv4-only.
		if br, err = bridgeByName(name); err != nil {
			return nil, err
		}
	}
	if br.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(br); err != nil {
			return nil, fmt.Errorf("bridge: set %s up: %w", name, err)
		}
	}
	have, err := netlinksafe.AddrList(br, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("bridge: list addresses of %s: %w", name, err)
	}
next:
	for _, gw := range gateways {
		for _, a := range have {
			if a.IPNet.String() == gw.String() {
				continue next
			}
		}
		if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: gw}); err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("bridge: add gateway %s to %s: %w", gw, name, err)
		}
	}
	return br, nil
}

func bridgeByName(name string) (*netlink.Bridge, error) {
	l, err := netlinksafe.LinkByName(name)
	if err != nil {
		return nil, err
	}
	br, ok := l.(*netlink.Bridge)
	if !ok {
		return nil, fmt.Errorf("bridge: %s exists but is a %s, not a bridge", name, l.Type())
	}
	return br, nil
}

// Pod describes one pod attachment.
type Pod struct {
	NetNS    ns.NetNS
	IfName   string // interface name inside the pod, e.g. eth0
	HostVeth string // node-side veth name, see HostVethName
	MTU      int
	Hairpin  bool
	Address  *net.IPNet // pod IP with the subnet's prefix length
	Gateway  net.IP
}

// AttachPod creates the veth pair for p, moves the node end to the calling namespace as a port of br, and
// configures the pod end (address, up, default route via p.Gateway) and the pod's loopback. On error it
// removes whatever it created. The returned interfaces are (node end, pod end), as CNI results list them.
func AttachPod(br *netlink.Bridge, p Pod) (host, pod *current.Interface, err error) {
	hostNS, err := ns.GetCurrentNS()
	if err != nil {
		return nil, nil, err
	}
	defer hostNS.Close()
	var hostIf, podIf net.Interface
	err = p.NetNS.Do(func(ns.NetNS) error {
		if err := setLoopbackUp(); err != nil {
			return err
		}
		hostIf, podIf, err = ip.SetupVethWithName(p.IfName, p.HostVeth, p.MTU, "", hostNS)
		if err != nil {
			return fmt.Errorf("bridge: create veth %s/%s: %w", p.IfName, p.HostVeth, err)
		}
		idx := 1
		res := &current.Result{
			Interfaces: []*current.Interface{{Name: p.HostVeth}, {Name: p.IfName}},
			IPs:        []*current.IPConfig{{Interface: &idx, Address: *p.Address, Gateway: p.Gateway}},
			Routes:     nil,
		}
		if err := ipam.ConfigureIface(p.IfName, res); err != nil {
			return fmt.Errorf("bridge: configure %s: %w", p.IfName, err)
		}
		l, err := netlinksafe.LinkByName(p.IfName)
		if err != nil {
			return err
		}
		if err := ip.AddDefaultRoute(p.Gateway, l); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("bridge: default route via %s: %w", p.Gateway, err)
		}
		return nil
	})
	if err != nil {
		_ = ip.DelLinkByName(p.HostVeth) // the pair, if it got that far
		return nil, nil, err
	}
	hv, err := netlinksafe.LinkByName(p.HostVeth)
	if err == nil {
		err = netlink.LinkSetMaster(hv, br)
	}
	if err == nil && p.Hairpin {
		err = netlink.LinkSetHairpin(hv, true)
	}
	if err != nil {
		_ = ip.DelLinkByName(p.HostVeth)
		return nil, nil, fmt.Errorf("bridge: attach %s to %s: %w", p.HostVeth, br.Name, err)
	}
	host = &current.Interface{Name: hostIf.Name, Mac: hostIf.HardwareAddr.String()}
	pod = &current.Interface{Name: podIf.Name, Mac: podIf.HardwareAddr.String(), Sandbox: p.NetNS.Path()}
	return host, pod, nil
}

func setLoopbackUp() error {
	lo, err := netlinksafe.LinkByName("lo")
	if err == nil && lo.Attrs().Flags&net.FlagUp == 0 {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("bridge: loopback up: %w", err)
	}
	return nil
}

// DetachPod deletes the pod's veth pair (deleting the node end removes the pod end with it). A missing
// veth, or a pod netns that no longer exists, is not an error: DEL must succeed repeatedly (CNI spec 1.1.0
// §DEL). The kernel tears a removed netns down asynchronously and takes the pair with it, so the node end
// can vanish between the lookup and the delete: ENODEV from the delete means the same as not found.
func DetachPod(hostVeth string) error {
	link, err := netlinksafe.LinkByName(hostVeth)
	if err != nil {
		if _, notFound := err.(netlink.LinkNotFoundError); notFound {
			return nil
		}
		return fmt.Errorf("bridge: look up %s: %w", hostVeth, err)
	}
	return deleteLink(link)
}

// deleteLink deletes link; a link that is already gone (ENODEV) is not an error.
func deleteLink(link netlink.Link) error {
	if err := netlink.LinkDel(link); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("bridge: delete %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// CheckPod verifies that p is wired as AttachPod left it (CNI spec 1.1.0 §CHECK): the node veth exists and
// is a port of bridge brName, and inside the pod the interface exists, is up, holds p.Address, and the
// default route goes via p.Gateway. The first discrepancy is returned as an error.
func CheckPod(brName string, p Pod) error {
	br, err := bridgeByName(brName)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", brName, err)
	}
	hv, err := netlinksafe.LinkByName(p.HostVeth)
	if err != nil {
		return fmt.Errorf("node veth %s: %w", p.HostVeth, err)
	}
	if hv.Attrs().MasterIndex != br.Attrs().Index {
		return fmt.Errorf("node veth %s is not a port of bridge %s", p.HostVeth, brName)
	}
	_, peerIdx, err := ip.GetVethPeerIfindex(p.HostVeth)
	if err != nil {
		return fmt.Errorf("node veth %s: %w", p.HostVeth, err)
	}
	return p.NetNS.Do(func(ns.NetNS) error {
		l, err := netlinksafe.LinkByName(p.IfName)
		if err != nil {
			return fmt.Errorf("pod interface %s: %w", p.IfName, err)
		}
		if l.Attrs().Index != peerIdx {
			return fmt.Errorf("pod interface %s is not the peer of node veth %s", p.IfName, p.HostVeth)
		}
		if l.Attrs().Flags&net.FlagUp == 0 {
			return fmt.Errorf("pod interface %s is down", p.IfName)
		}
		idx := 0
		if err := ip.ValidateExpectedInterfaceIPs(p.IfName, []*current.IPConfig{{Interface: &idx, Address: *p.Address}}); err != nil {
			return err
		}
		routes, err := netlinksafe.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if ip.IsIPNetZero(r.Dst) && r.Gw.Equal(p.Gateway) {
				return nil
			}
		}
		return fmt.Errorf("pod interface %s has no default route via %s", p.IfName, p.Gateway)
	})
}

// EnableIPForward sets net.ipv4.ip_forward=1 in the calling namespace (a no-op write when already on).
func EnableIPForward() error {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err == nil && len(b) > 0 && b[0] == '1' {
		return nil
	}
	return ip.EnableIP4Forward()
}
