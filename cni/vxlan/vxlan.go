// Package vxlan keeps a node's VXLAN tunnel endpoint (VTEP), as flannel's vxlan backend does: one
// device (DeviceName, "nodekit.<VNI>") on the interface that holds the node's IP, with learning off, and
// for every other node a permanent neighbour entry (its VTEP address → its VTEP MAC) and a forwarding
// database entry (its VTEP MAC → its node IP), so that the kernel encapsulates pod traffic to that node
// in UDP (port DefaultPort) without any multicast or learning. The routes over the device are cni/routes'
// (onlink, via the peer's VTEP address); the agent's route controller (podroutes) drives both, and
// `nodekit down` deletes the device (Teardown), with which the kernel drops its routes and entries.
//
// A node's VTEP address is the first address of its podCIDR (the network address, flannel's choice: the
// bridge holds the next one), on the device as a /32. Its MAC is derived from the node IP (MAC), so that
// it is the same after the device is re-created (a reboot), and the other nodes' entries stay right.
package vxlan

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
)

// Defaults, as flannel's vxlan backend: VNI 1, the Linux kernel's VXLAN port 8472 (not IANA's 4789), and
// the bytes the encapsulation adds (outer IPv4 20, UDP 8, VXLAN 8, inner Ethernet 14), taken off the
// underlying interface's MTU.
const (
	DefaultVNI  = 1
	DefaultPort = 8472
	Overhead    = 50
	// namePrefix begins every device this package makes; Teardown deletes the VXLAN links named so.
	namePrefix = "nodekit."
)

// DeviceName is the VXLAN device of vni: "nodekit.<vni>" (flannel's "flannel.<vni>").
func DeviceName(vni int) string { return fmt.Sprintf("%s%d", namePrefix, vni) }

// MAC is the VTEP MAC of the node whose IPv4 node IP is ip: 0e:6b:<the address's four bytes> (a locally
// administered unicast address, unique among nodes with distinct IPs).
func MAC(ip net.IP) net.HardwareAddr {
	v4 := ip.To4()
	return net.HardwareAddr{0x0e, 0x6b, v4[0], v4[1], v4[2], v4[3]}
}

// VTEPAddress is the VTEP address of the node with podCIDR: its network address.
func VTEPAddress(podCIDR *net.IPNet) net.IP { return podCIDR.IP.Mask(podCIDR.Mask).To4() }

// Device is one node's VTEP.
type Device struct {
	// VNI is the VXLAN network identifier (1..16777215), Port the UDP destination port (1..65535).
	VNI, Port int
	// LocalIP is the node's IPv4 address the tunnels leave from; the interface holding it carries them.
	LocalIP net.IP
}

// Validate checks the VNI, the port and the local IP.
func (d Device) Validate() error {
	if d.VNI < 1 || d.VNI > 1<<24-1 {
		return fmt.Errorf("vxlan: VNI %d: want 1..16777215", d.VNI)
	}
	if d.Port < 1 || d.Port > 65535 {
		return fmt.Errorf("vxlan: port %d: want 1..65535", d.Port)
	}
	if d.LocalIP.To4() == nil {
		return fmt.Errorf("vxlan: local IP %v: want the node's IPv4 address", d.LocalIP)
	}
	return nil
}

// Ensure makes the calling thread's network namespace hold d's device, up, with MTU the underlying
// interface's minus Overhead and MAC(LocalIP): it creates it, fixes its MTU and MAC, or re-creates a device
// of that name with other VXLAN settings (VNI, port, local IP, underlying interface, learning), as flannel
// does. It returns the device's link index. LocalIP must be an address of an interface of the namespace.
func Ensure(d Device) (int, error) {
	if err := d.Validate(); err != nil {
		return 0, err
	}
	parent, err := linkWithAddress(d.LocalIP)
	if err != nil {
		return 0, err
	}
	mtu := parent.Attrs().MTU - Overhead
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU, la.HardwareAddr = DeviceName(d.VNI), mtu, MAC(d.LocalIP)
	want := &netlink.Vxlan{LinkAttrs: la, VxlanId: d.VNI, VtepDevIndex: parent.Attrs().Index, SrcAddr: d.LocalIP.To4(),
		Port: d.Port, Learning: false}
	link, err := netlinksafe.LinkByName(la.Name)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound):
		link = nil
	case err != nil:
		return 0, fmt.Errorf("vxlan: %s: %w", la.Name, err)
	}
	if link != nil && !compatible(link, want) {
		if err := netlink.LinkDel(link); err != nil {
			return 0, fmt.Errorf("vxlan: delete %s (other settings): %w", la.Name, err)
		}
		link = nil
	}
	if link == nil {
		if err := netlink.LinkAdd(want); err != nil {
			return 0, fmt.Errorf("vxlan: create %s (VNI %d, port %d, local %s on %s): %w", la.Name, d.VNI, d.Port, d.LocalIP, parent.Attrs().Name, err)
		}
		if link, err = netlinksafe.LinkByName(la.Name); err != nil {
			return 0, fmt.Errorf("vxlan: %s: %w", la.Name, err)
		}
	}
	if link.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			return 0, fmt.Errorf("vxlan: %s: MTU %d: %w", la.Name, mtu, err)
		}
	}
	if link.Attrs().HardwareAddr.String() != la.HardwareAddr.String() {
		if err := netlink.LinkSetHardwareAddr(link, la.HardwareAddr); err != nil {
			return 0, fmt.Errorf("vxlan: %s: MAC %s: %w", la.Name, la.HardwareAddr, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return 0, fmt.Errorf("vxlan: %s: up: %w", la.Name, err)
		}
	}
	return link.Attrs().Index, nil
}

// compatible reports whether the existing link is a VXLAN device with want's tunnel settings.
func compatible(link netlink.Link, want *netlink.Vxlan) bool {
	vx, ok := link.(*netlink.Vxlan)
	return ok && vx.VxlanId == want.VxlanId && vx.Port == want.Port && vx.SrcAddr.Equal(want.SrcAddr) &&
		vx.VtepDevIndex == want.VtepDevIndex && !vx.Learning
}

// linkWithAddress returns the interface of the calling thread's namespace that holds ip.
func linkWithAddress(ip net.IP) (netlink.Link, error) {
	addrs, err := netlinksafe.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("vxlan: list addresses: %w", err)
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			l, err := netlink.LinkByIndex(a.LinkIndex)
			if err != nil {
				return nil, fmt.Errorf("vxlan: interface of %s: %w", ip, err)
			}
			return l, nil
		}
	}
	return nil, fmt.Errorf("vxlan: %s is not an address of this host: the node IP must be a local address for the tunnels to leave from", ip)
}

// SetAddress makes ip/32 the only IPv4 address of the device at index.
func SetAddress(index int, ip net.IP) error {
	link, err := netlink.LinkByIndex(index)
	if err != nil {
		return fmt.Errorf("vxlan: device #%d: %w", index, err)
	}
	addrs, err := netlinksafe.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("vxlan: %s: addresses: %w", link.Attrs().Name, err)
	}
	want := &net.IPNet{IP: ip.To4(), Mask: net.CIDRMask(32, 32)}
	have := false
	for _, a := range addrs {
		if a.IPNet.String() == want.String() {
			have = true
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil {
			return fmt.Errorf("vxlan: %s: delete address %s: %w", link.Attrs().Name, a.IPNet, err)
		}
	}
	if have {
		return nil
	}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: want}); err != nil {
		return fmt.Errorf("vxlan: %s: address %s: %w", link.Attrs().Name, want, err)
	}
	return nil
}

// Peer is another node's VTEP: its VTEP address and MAC, and the node IP its tunnel goes to.
type Peer struct {
	Node   string
	VTEP   net.IP
	MAC    net.HardwareAddr
	NodeIP net.IP
}

func (p Peer) String() string {
	return fmt.Sprintf("%s: %s lladdr %s dst %s", p.Node, p.VTEP, p.MAC, p.NodeIP)
}

// SyncPeers makes the device at index hold exactly the peers' permanent entries: a neighbour entry VTEP
// → MAC and a forwarding entry MAC → NodeIP each (added, or replaced when changed); permanent entries of
// the device that no peer wants are deleted. It returns how many entries it added and removed; on error it
// stops at the first entry that failed (naming it).
func SyncPeers(index int, peers []Peer) (added, removed int, err error) {
	wantNeigh := map[string]string{} // VTEP → MAC
	wantFDB := map[string]string{}   // MAC → node IP
	for _, p := range peers {
		if p.VTEP.To4() == nil || p.NodeIP.To4() == nil || len(p.MAC) != 6 {
			return 0, 0, fmt.Errorf("vxlan: peer %s needs an IPv4 VTEP address and node IP and a MAC", p)
		}
		wantNeigh[p.VTEP.To4().String()] = p.MAC.String()
		wantFDB[p.MAC.String()] = p.NodeIP.To4().String()
	}
	haveNeigh, err := listNeigh(index, netlink.FAMILY_V4)
	if err != nil {
		return 0, 0, err
	}
	haveFDB, err := listNeigh(index, syscall.AF_BRIDGE)
	if err != nil {
		return 0, 0, err
	}
	okNeigh, okFDB := map[string]bool{}, map[string]bool{}
	for _, n := range haveNeigh {
		if n.State&netlink.NUD_PERMANENT == 0 || n.IP == nil {
			continue // the kernel's own (failed resolutions): not ours
		}
		if wantNeigh[n.IP.String()] == n.HardwareAddr.String() {
			okNeigh[n.IP.String()] = true
			continue
		}
		if err := netlink.NeighDel(&n); err != nil && !errors.Is(err, syscall.ENOENT) {
			return added, removed, fmt.Errorf("vxlan: delete neighbour %s: %w", n.IP, err)
		}
		removed++
	}
	for _, n := range haveFDB {
		if n.State&netlink.NUD_PERMANENT == 0 || n.IP == nil {
			continue
		}
		if wantFDB[n.HardwareAddr.String()] == n.IP.String() && !okFDB[n.HardwareAddr.String()] {
			okFDB[n.HardwareAddr.String()] = true
			continue
		}
		if err := netlink.NeighDel(&n); err != nil && !errors.Is(err, syscall.ENOENT) {
			return added, removed, fmt.Errorf("vxlan: delete forwarding entry %s dst %s: %w", n.HardwareAddr, n.IP, err)
		}
		removed++
	}
	for _, p := range peers {
		if !okFDB[p.MAC.String()] {
			fdb := &netlink.Neigh{LinkIndex: index, Family: syscall.AF_BRIDGE, State: netlink.NUD_PERMANENT, Flags: netlink.NTF_SELF,
				IP: p.NodeIP.To4(), HardwareAddr: p.MAC}
			if err := netlink.NeighSet(fdb); err != nil {
				return added, removed, fmt.Errorf("vxlan: forwarding entry %s dst %s (%s): %w", p.MAC, p.NodeIP, p.Node, err)
			}
			okFDB[p.MAC.String()] = true
			added++
		}
		if !okNeigh[p.VTEP.To4().String()] {
			nb := &netlink.Neigh{LinkIndex: index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, Type: syscall.RTN_UNICAST,
				IP: p.VTEP.To4(), HardwareAddr: p.MAC}
			if err := netlink.NeighSet(nb); err != nil {
				return added, removed, fmt.Errorf("vxlan: neighbour %s lladdr %s (%s): %w", p.VTEP, p.MAC, p.Node, err)
			}
			okNeigh[p.VTEP.To4().String()] = true
			added++
		}
	}
	return added, removed, nil
}

// listNeigh lists the device's entries of family, retrying a dump the kernel interrupted.
func listNeigh(index, family int) ([]netlink.Neigh, error) {
	for i := 0; ; i++ {
		ns, err := netlink.NeighList(index, family)
		if errors.Is(err, netlink.ErrDumpInterrupted) && i < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("vxlan: list entries of device #%d: %w", index, err)
		}
		return ns, nil
	}
}

// Teardown deletes, in the calling thread's network namespace, every VXLAN device this package made
// (named nodekit.<VNI>); the kernel removes their routes, neighbour and forwarding entries with them. It
// returns the names deleted.
func Teardown() ([]string, error) {
	links, err := netlinksafe.LinkList()
	if err != nil {
		return nil, fmt.Errorf("vxlan: list links: %w", err)
	}
	var gone []string
	var errs []error
	for _, l := range links {
		if _, ok := l.(*netlink.Vxlan); !ok || !strings.HasPrefix(l.Attrs().Name, namePrefix) {
			continue
		}
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("vxlan: delete %s: %w", l.Attrs().Name, err))
			continue
		}
		gone = append(gone, l.Attrs().Name)
	}
	return gone, errors.Join(errs...)
}
