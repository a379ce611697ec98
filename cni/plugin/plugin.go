// Package plugin implements the commands of the nodekit-cni plugin (CNI spec 1.1.0 §"Section 2: Execution
// Protocol"): ADD, DEL, CHECK, STATUS and GC (VERSION is answered by skel). It runs in the node's network
// namespace; CNI_NETNS names the pod's.
//
// ADD: allocate an address (cni/ipam), ensure the node bridge and ip_forward, wire a veth pair
// (cni/bridge), ensure egress masquerade (cni/masq) and hostPorts (cni/portmap). Any failure undoes what
// that ADD created. DEL undoes ADD and succeeds when there is nothing left to undo. ADD, DEL and CHECK of
// one attachment are serialised by a lock (ipam.Store.LockAttachment), so a runtime racing them anyway
// cannot leave a veth without its IP. GC releases what
// belongs to attachments missing from cni.dev/valid-attachments: the IP, the veth, hostPort rules and the
// network namespace the attachment was made in (a runtime that crashed while making a sandbox forgets
// it, so nobody else removes it).
package plugin

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/coreos/go-iptables/iptables"
	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/cni/bridge"
	"github.com/nodekit/nodekit/cni/ipam"
	"github.com/nodekit/nodekit/cni/masq"
	"github.com/nodekit/nodekit/cni/netconf"
	"github.com/nodekit/nodekit/cni/portmap"
)

// ErrIPExhausted is the plugin-specific CNI error code (spec: 100 and above are plugin-specific) returned
// by ADD when the podCIDR has no free address.
const ErrIPExhausted uint = 100

// Funcs are the command handlers to pass to skel.PluginMainFuncs.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, Status: cmdStatus, GC: cmdGC}
}

// network is a parsed configuration with its allocator.
type network struct {
	conf  *netconf.NetConf
	store *ipam.Store
}

func load(stdin []byte) (*network, error) {
	conf, err := netconf.Parse(stdin)
	if err != nil {
		return nil, err
	}
	ranges := make([]ipam.Range, len(conf.IPAM.Ranges))
	for i, r := range conf.IPAM.Ranges {
		ranges[i] = ipam.Range{Subnet: net.IPNet(r.Subnet), Start: r.RangeStart, End: r.RangeEnd, Gateway: r.Gateway}
	}
	store, err := ipam.Open(conf.IPAM.DataDir, conf.Name, ranges)
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, "cannot open the IPAM data directory", err.Error())
	}
	return &network{conf: conf, store: store}, nil
}

func (n *network) subnets() []*net.IPNet {
	out := make([]*net.IPNet, len(n.store.Ranges))
	for i := range n.store.Ranges {
		out[i] = &n.store.Ranges[i].Subnet
	}
	return out
}

func (n *network) pod(netNS ns.NetNS, a ipam.Allocation) bridge.Pod {
	r := n.store.Ranges[a.Range]
	return bridge.Pod{
		NetNS: netNS, IfName: a.IfName, HostVeth: bridge.HostVethName(a.ContainerID, a.IfName),
		MTU: n.conf.MTU, Hairpin: n.conf.HairpinMode,
		Address: &net.IPNet{IP: a.IP, Mask: r.Subnet.Mask}, Gateway: r.Gateway,
	}
}

func internal(msg string, err error) error {
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	return types.NewError(types.ErrInternal, msg, err.Error())
}

// lockAttachment serialises this command with any other on the same attachment (see ipam.LockAttachment).
func (n *network) lockAttachment(args *skel.CmdArgs) (func(), error) {
	unlock, err := n.store.LockAttachment(args.ContainerID, args.IfName)
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, "cannot lock the attachment", err.Error())
	}
	return unlock, nil
}

func cmdAdd(args *skel.CmdArgs) (err error) {
	n, err := load(args.StdinData)
	if err != nil {
		return err
	}
	unlock, err := n.lockAttachment(args)
	if err != nil {
		return err
	}
	defer unlock()
	netNS, err := ns.GetNS(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, "cannot open the pod network namespace", err.Error())
	}
	defer netNS.Close()

	a, err := n.store.Allocate(args.ContainerID, args.IfName, args.Netns)
	if errors.Is(err, ipam.ErrExhausted) {
		return types.NewError(ErrIPExhausted, "no free pod IP address", err.Error())
	}
	if err != nil {
		return internal("IP allocation failed", err)
	}
	p := n.pod(netNS, a)
	attached := false
	defer func() {
		if err == nil {
			return
		}
		if attached {
			_ = bridge.DetachPod(p.HostVeth)
		}
		_, _, _ = n.store.Release(args.ContainerID, args.IfName)
	}()

	gateways := make([]*net.IPNet, len(n.store.Ranges))
	for i, r := range n.store.Ranges {
		gateways[i] = &net.IPNet{IP: r.Gateway, Mask: r.Subnet.Mask}
	}
	br, err := bridge.EnsureBridge(n.conf.Bridge, n.conf.MTU, gateways)
	if err != nil {
		return internal("node bridge setup failed", err)
	}
	if err := bridge.EnableIPForward(); err != nil {
		return internal("enabling net.ipv4.ip_forward failed", err)
	}
	// A repeated ADD for the same attachment starts from scratch.
	if err := bridge.DetachPod(p.HostVeth); err != nil {
		return internal("removing a previous veth failed", err)
	}
	hostIf, podIf, err := bridge.AttachPod(br, p)
	if err != nil {
		return internal("pod interface setup failed", err)
	}
	attached = true

	if n.conf.ClusterCIDR != nil || len(n.conf.RuntimeConfig.PortMappings) > 0 {
		ipt, err := iptables.New()
		if err != nil {
			return internal("iptables unavailable", err)
		}
		err = n.store.WithLock(func() error {
			if n.conf.ClusterCIDR != nil {
				if err := masq.Ensure(ipt, n.conf.Name, n.subnets(), (*net.IPNet)(n.conf.ClusterCIDR)); err != nil {
					return err
				}
			}
			return portmap.Add(ipt, n.conf.Name, args.ContainerID, args.IfName, a.IP, n.conf.RuntimeConfig.PortMappings)
		})
		if err != nil {
			return internal("iptables setup failed", err)
		}
	}

	brIf := &current.Interface{Name: br.Name, Mac: br.HardwareAddr.String()}
	podIdx := 2
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{brIf, hostIf, podIf},
		IPs:        []*current.IPConfig{{Interface: &podIdx, Address: *p.Address, Gateway: p.Gateway}},
		Routes:     []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, GW: p.Gateway}},
		DNS:        n.conf.DNS,
	}
	return types.PrintResult(res, n.conf.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	n, err := load(args.StdinData)
	if err != nil {
		return err
	}
	unlock, err := n.lockAttachment(args)
	if err != nil {
		return err
	}
	defer unlock()
	if len(n.conf.RuntimeConfig.PortMappings) > 0 {
		ipt, err := iptables.New()
		if err != nil {
			return internal("iptables unavailable", err)
		}
		if err := n.store.WithLock(func() error { return portmap.Remove(ipt, n.conf.Name, args.ContainerID, args.IfName) }); err != nil {
			return internal("removing hostPort rules failed", err)
		}
	}
	// The pod netns may be gone already; the node end of the veth is enough to remove the pair.
	if err := bridge.DetachPod(bridge.HostVethName(args.ContainerID, args.IfName)); err != nil {
		return internal("removing the pod interface failed", err)
	}
	if _, _, err := n.store.Release(args.ContainerID, args.IfName); err != nil {
		return internal("releasing the pod IP failed", err)
	}
	return nil
}

func cmdCheck(args *skel.CmdArgs) error {
	n, err := load(args.StdinData)
	if err != nil {
		return err
	}
	unlock, err := n.lockAttachment(args)
	if err != nil {
		return err
	}
	defer unlock()
	a, ok, err := n.store.Lookup(args.ContainerID, args.IfName)
	if err != nil {
		return internal("reading the IP allocation failed", err)
	}
	if !ok {
		return types.NewError(types.ErrUnknownContainer, "no IP is allocated to this attachment",
			fmt.Sprintf("container %s interface %s", args.ContainerID, args.IfName))
	}
	if a.Range < 0 {
		return types.NewError(types.ErrInvalidNetworkConfig, "the allocated IP is outside the configured ranges", a.IP.String())
	}
	netNS, err := ns.GetNS(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, "cannot open the pod network namespace", err.Error())
	}
	defer netNS.Close()
	if err := bridge.CheckPod(n.conf.Bridge, n.pod(netNS, a)); err != nil {
		return types.NewError(types.ErrInternal, "pod network check failed", err.Error())
	}
	return nil
}

// cmdStatus reports whether ADD can be served (CNI spec 1.1.0 §STATUS): the configuration is valid and the
// IPAM data directory is usable.
func cmdStatus(args *skel.CmdArgs) error {
	n, err := load(args.StdinData)
	var te *types.Error
	if errors.As(err, &te) && te.Code == types.ErrIOFailure {
		return types.NewError(types.ErrPluginNotAvailable, te.Msg, te.Details)
	}
	if err != nil {
		return err
	}
	if err := n.store.WithLock(func() error { return nil }); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "the IPAM data directory is not usable", err.Error())
	}
	return nil
}

func cmdGC(args *skel.CmdArgs) error {
	n, err := load(args.StdinData)
	if err != nil {
		return err
	}
	valid := make(map[types.GCAttachment]bool, len(n.conf.ValidAttachments))
	for _, v := range n.conf.ValidAttachments {
		valid[v] = true
	}
	keep := func(id, ifName string) bool { return valid[types.GCAttachment{ContainerID: id, IfName: ifName}] }
	freed, err := n.store.GC(keep)
	if err != nil {
		return internal("releasing stale IPs failed", err)
	}
	for _, a := range freed {
		// stderr reaches the runtime's log; one line per released attachment.
		slog.Info("GC released a stale attachment", "network", n.conf.Name, "container", a.ContainerID, "ifname", a.IfName, "ip", a.IP)
		if err := bridge.DetachPod(bridge.HostVethName(a.ContainerID, a.IfName)); err != nil {
			return internal("removing a stale pod interface failed", err)
		}
		if err := removeNetNS(a.NetNS); err != nil {
			return internal("removing a stale pod network namespace failed", err)
		}
	}
	ipt, err := iptables.New()
	if err != nil {
		return internal("iptables unavailable", err)
	}
	if err := n.store.WithLock(func() error { _, err := portmap.GC(ipt, n.conf.Name, keep); return err }); err != nil {
		return internal("removing stale hostPort rules failed", err)
	}
	return nil
}

// removeNetNS unmounts and removes the network namespace bind mount at path (recorded at ADD) when it is
// still one; a path that is not an nsfs mount (gone, reused, empty) is left alone.
func removeNetNS(path string) error {
	if path == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || st.Type != unix.NSFS_MAGIC {
		return nil
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	slog.Info("GC removed a stale network namespace", "netns", path)
	return nil
}
