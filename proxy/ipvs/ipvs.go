// Package ipvs is the proxy's IPVS backend (kube-proxy's --proxy-mode ipvs): every ClusterIP and external IP
// is bound to the dummy interface nodekit-ipvs0 so the node accepts it, each service port becomes an IPVS
// virtual server whose real servers are the port's endpoints (scheduler rr unless configured), NodePorts
// become virtual servers on each node address, and a few iptables rules with ipsets do what IPVS cannot:
// masquerade ClusterIP traffic from outside the cluster CIDR, NodePort traffic and hairpin traffic.
//
// The kernel must have ip_vs; New fails with a clear error when it has not.
package ipvs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/proxy/conntrack"
	"github.com/nodekit/nodekit/proxy/iptables"
	"github.com/nodekit/nodekit/proxy/state"
)

// Names nodekit owns in IPVS mode.
const (
	// Interface is the dummy interface holding ClusterIPs and external IPs.
	Interface = "nodekit-ipvs0"
	// SetClusterIP holds ClusterIP,proto:port of every service port (hash:ip,port).
	SetClusterIP = "NODEKIT-CLUSTER-IP"
	// SetLoopBack holds endpointIP,proto:port,endpointIP for hairpin masquerade (hash:ip,port,ip).
	SetLoopBack = "NODEKIT-LOOP-BACK"
	// SetNodePort holds the NodePorts with policy Cluster, which are masqueraded (bitmap:port; a port number
	// is taken by one Service for all protocols, so the protocol need not be matched).
	SetNodePort = "NODEKIT-NODE-PORT"
)

// Config holds the node facts the IPVS backend needs.
type Config struct {
	// ClusterCIDR is the pod network; see iptables.Config.
	ClusterCIDR netip.Prefix
	// Scheduler is the IPVS scheduler name; empty means "rr".
	Scheduler string
}

// Result describes one sync; Rules counts "virtual_servers", "real_servers" and the iptables tables.
type Result struct {
	Rules map[string]int
}

// Available reports whether the running kernel has IPVS, with an error saying what is missing when not.
func Available() error {
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		return fmt.Errorf("IPVS mode needs the ip_vs kernel module, and this kernel has none (/proc/net/ip_vs: %v); load ip_vs or use --proxy-mode iptables", err)
	}
	h, err := ipvs.New("")
	if err != nil {
		return fmt.Errorf("IPVS mode: the kernel's IPVS netlink family is not usable: %w", err)
	}
	h.Close()
	return nil
}

// Syncer programs IPVS; not safe for concurrent use.
type Syncer struct {
	cfg    Config
	log    *slog.Logger
	handle *ipvs.Handle
	ipt    *iptables.Syncer
	prev   *state.Snapshot
}

// New checks that the kernel has IPVS and ipset, and returns a Syncer.
func New(cfg Config, log *slog.Logger) (*Syncer, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("ipset"); err != nil {
		return nil, fmt.Errorf("IPVS mode needs the ipset tool: %w", err)
	}
	if cfg.Scheduler == "" {
		cfg.Scheduler = "rr"
	}
	// IPVS-forwarded packets must pass through conntrack for the masquerade rules to apply (kube-proxy sets
	// the same sysctl).
	if err := os.WriteFile("/proc/sys/net/ipv4/vs/conntrack", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("IPVS mode: set net.ipv4.vs.conntrack=1: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	h, err := ipvs.New("")
	if err != nil {
		return nil, fmt.Errorf("IPVS mode: %w", err)
	}
	ipt, err := iptables.New(iptables.Config{ClusterCIDR: cfg.ClusterCIDR}, log)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Syncer{cfg: cfg, log: log.With("mode", "ipvs"), handle: h, ipt: ipt}, nil
}

// VirtualServer is one desired IPVS service with its real servers.
type VirtualServer struct {
	Addr      netip.Addr
	Port      uint16
	Protocol  v1.Protocol
	Scheduler string
	// AffinityTimeout > 0 makes the service persistent for that many seconds (sessionAffinity ClientIP).
	AffinityTimeout uint32
	Reals           []netip.AddrPort
}

// Key identifies a virtual server: "PROTO/addr:port".
func (v VirtualServer) Key() string {
	return string(v.Protocol) + "/" + netip.AddrPortFrom(v.Addr, v.Port).String()
}

// Desired computes the IPVS state for snap: virtual servers for ClusterIPs (internal endpoints), external IPs
// and NodePorts on each of nodeIPs (external endpoints), the addresses to bind on the dummy interface, and the
// ipset entries. A port without endpoints gets a virtual server without real servers (IPVS then drops).
func Desired(snap *state.Snapshot, nodeIPs []netip.Addr, scheduler string) (vss []VirtualServer, bind []netip.Addr, sets map[string][]string) {
	sets = map[string][]string{SetClusterIP: nil, SetLoopBack: nil, SetNodePort: nil}
	bound := map[netip.Addr]bool{}
	for _, sp := range snap.Ports {
		proto := strings.ToLower(string(sp.Protocol))
		mk := func(addr netip.Addr, port int32, eps []state.Endpoint) VirtualServer {
			vs := VirtualServer{Addr: addr, Port: uint16(port), Protocol: sp.Protocol, Scheduler: scheduler, AffinityTimeout: uint32(sp.AffinityTimeout)}
			for _, e := range eps {
				vs.Reals = append(vs.Reals, netip.AddrPortFrom(e.IP, uint16(e.Port)))
			}
			return vs
		}
		vss = append(vss, mk(sp.ClusterIP, sp.Port, sp.InternalEndpoints()))
		bound[sp.ClusterIP] = true
		sets[SetClusterIP] = append(sets[SetClusterIP], fmt.Sprintf("%s,%s:%d", sp.ClusterIP, proto, sp.Port))
		for _, ip := range sp.ExternalIPs {
			vss = append(vss, mk(ip, sp.Port, sp.ExternalEndpoints()))
			bound[ip] = true
		}
		if sp.NodePort != 0 {
			for _, ip := range nodeIPs {
				vss = append(vss, mk(ip, sp.NodePort, sp.ExternalEndpoints()))
			}
			if !sp.ExternalLocal {
				sets[SetNodePort] = append(sets[SetNodePort], fmt.Sprintf("%s:%d", proto, sp.NodePort))
			}
		}
		for _, e := range sp.Endpoints {
			sets[SetLoopBack] = append(sets[SetLoopBack], fmt.Sprintf("%s,%s:%d,%s", e.IP, proto, e.Port, e.IP))
		}
	}
	for a := range bound {
		bind = append(bind, a)
	}
	slices.SortFunc(bind, netip.Addr.Compare)
	slices.SortFunc(vss, func(a, b VirtualServer) int { return cmp.Compare(a.Key(), b.Key()) })
	for k := range sets {
		slices.Sort(sets[k])
		sets[k] = slices.Compact(sets[k])
	}
	return vss, bind, sets
}

// rules are the iptables rules IPVS mode needs (kube-proxy's ipvs proxier, reduced to masquerading).
func rules(cidr netip.Prefix) *iptables.Ruleset {
	rs := iptables.NewRuleset()
	nat := rs.Tables[iptables.TableNAT]
	if cidr.IsValid() {
		nat.Add(iptables.ChainServices, slices.Concat(iptables.Comment("nodekit service cluster IP from outside the cluster"),
			[]string{"!", "-s", cidr.String(), "-m", "set", "--match-set", SetClusterIP, "dst,dst", "-j", iptables.ChainMarkMasq})...)
	}
	nat.Add(iptables.ChainServices, slices.Concat(iptables.Comment("nodekit service nodeports"),
		[]string{"-m", "addrtype", "--dst-type", "LOCAL", "-j", iptables.ChainNodePorts})...)
	nat.Add(iptables.ChainNodePorts, slices.Concat(iptables.Comment("nodekit nodeport with policy Cluster"),
		[]string{"-m", "set", "--match-set", SetNodePort, "dst", "-j", iptables.ChainMarkMasq})...)
	nat.Add(iptables.ChainPostrouting, slices.Concat(iptables.Comment("nodekit hairpin: endpoint reaching itself"),
		[]string{"-m", "set", "--match-set", SetLoopBack, "dst,dst,src", "-j", "MASQUERADE"})...)
	return rs
}

// Sync makes the dummy interface, the ipsets, IPVS and the iptables rules match snap, then removes stale UDP
// conntrack entries.
func (s *Syncer) Sync(ctx context.Context, snap *state.Snapshot, full bool) (Result, error) {
	nodeIPs, err := nodeAddresses()
	if err != nil {
		return Result{}, err
	}
	vss, bind, sets := Desired(snap, nodeIPs, s.cfg.Scheduler)
	if err := s.syncInterface(bind); err != nil {
		return Result{}, err
	}
	if err := syncSets(ctx, sets); err != nil {
		return Result{}, err
	}
	reals, err := s.syncServices(vss, append(bind, nodeIPs...))
	if err != nil {
		return Result{}, err
	}
	ir, err := s.ipt.Write(ctx, rules(s.cfg.ClusterCIDR), full)
	if err != nil {
		return Result{}, err
	}
	if _, err := conntrack.Delete(conntrack.Stale(s.prev, snap)); err != nil {
		s.log.Warn("conntrack cleanup failed", "err", err)
	}
	s.prev = snap
	res := Result{Rules: map[string]int{"virtual_servers": len(vss), "real_servers": reals}}
	for k, v := range ir.Rules {
		res.Rules[k] = v
	}
	return res, nil
}

// nodeAddresses returns the node's IPv4 addresses on interfaces other than loopback and nodekit's dummy:
// where NodePort virtual servers listen.
func nodeAddresses() ([]netip.Addr, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list node addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		link, err := netlink.LinkByIndex(a.LinkIndex)
		if err != nil || link.Attrs().Name == Interface || link.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

func (s *Syncer) syncInterface(bind []netip.Addr) error {
	link, err := netlink.LinkByName(Interface)
	if err != nil {
		if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: Interface}}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create %s: %w", Interface, err)
		}
		if link, err = netlink.LinkByName(Interface); err != nil {
			return fmt.Errorf("find %s: %w", Interface, err)
		}
	}
	have, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list %s addresses: %w", Interface, err)
	}
	want := map[netip.Addr]bool{}
	for _, a := range bind {
		want[a] = true
	}
	for _, a := range have {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		if want[ip] {
			delete(want, ip)
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil {
			return fmt.Errorf("remove %s from %s: %w", ip, Interface, err)
		}
	}
	for ip := range want {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}}
		if err := netlink.AddrAdd(link, addr); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("bind %s to %s: %w", ip, Interface, err)
		}
	}
	return nil
}

// syncSets replaces each ipset's content atomically: fill a temporary set, swap, destroy the old one.
func syncSets(ctx context.Context, sets map[string][]string) error {
	var b strings.Builder
	for _, name := range []string{SetClusterIP, SetLoopBack, SetNodePort} {
		typ := map[string]string{SetClusterIP: "hash:ip,port", SetLoopBack: "hash:ip,port,ip", SetNodePort: "bitmap:port range 0-65535"}[name]
		tmp := name + "-TMP"
		fmt.Fprintf(&b, "create %s %s -exist\n", name, typ)
		fmt.Fprintf(&b, "create %s %s -exist\nflush %s\n", tmp, typ, tmp)
		for _, e := range sets[name] {
			if name == SetNodePort {
				e = e[strings.IndexByte(e, ':')+1:] // bitmap:port holds the port; the protocol is matched in iptables
			}
			fmt.Fprintf(&b, "add %s %s -exist\n", tmp, e)
		}
		fmt.Fprintf(&b, "swap %s %s\ndestroy %s\n", tmp, name, tmp)
	}
	cmd := exec.CommandContext(ctx, "ipset", "restore")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ipset restore: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// syncServices makes IPVS hold exactly vss among the services on addresses nodekit manages (owned), and
// returns the number of real servers.
func (s *Syncer) syncServices(vss []VirtualServer, owned []netip.Addr) (int, error) {
	have, err := s.handle.GetServices()
	if err != nil {
		return 0, fmt.Errorf("list IPVS services: %w", err)
	}
	want := map[string]VirtualServer{}
	for _, v := range vss {
		want[v.Key()] = v
	}
	for _, h := range have {
		addr, _ := netip.AddrFromSlice(h.Address.To4())
		key := protoName(h.Protocol) + "/" + netip.AddrPortFrom(addr, h.Port).String()
		if _, ok := want[key]; !ok && slices.Contains(owned, addr) {
			if err := s.handle.DelService(h); err != nil {
				return 0, fmt.Errorf("delete IPVS service %s: %w", key, err)
			}
		}
	}
	reals := 0
	for _, v := range vss {
		svc := toService(v)
		if !s.handle.IsServicePresent(svc) {
			if err := s.handle.NewService(svc); err != nil {
				return 0, fmt.Errorf("add IPVS service %s: %w", v.Key(), err)
			}
		} else if err := s.handle.UpdateService(svc); err != nil {
			return 0, fmt.Errorf("update IPVS service %s: %w", v.Key(), err)
		}
		dests, err := s.handle.GetDestinations(svc)
		if err != nil {
			return 0, fmt.Errorf("list real servers of %s: %w", v.Key(), err)
		}
		wantReal := map[netip.AddrPort]bool{}
		for _, r := range v.Reals {
			wantReal[r] = true
		}
		for _, d := range dests {
			ip, _ := netip.AddrFromSlice(d.Address.To4())
			ap := netip.AddrPortFrom(ip, d.Port)
			if wantReal[ap] {
				delete(wantReal, ap)
				continue
			}
			if err := s.handle.DelDestination(svc, d); err != nil {
				return 0, fmt.Errorf("remove real server %s from %s: %w", ap, v.Key(), err)
			}
		}
		for r := range wantReal {
			d := &ipvs.Destination{Address: r.Addr().AsSlice(), Port: r.Port(), Weight: 1, ConnectionFlags: ipvs.ConnectionFlagMasq, AddressFamily: unix.AF_INET}
			if err := s.handle.NewDestination(svc, d); err != nil {
				return 0, fmt.Errorf("add real server %s to %s: %w", r, v.Key(), err)
			}
		}
		reals += len(v.Reals)
	}
	return reals, nil
}

func toService(v VirtualServer) *ipvs.Service {
	svc := &ipvs.Service{Address: v.Addr.AsSlice(), Port: v.Port, Protocol: protoNumber(v.Protocol), SchedName: v.Scheduler,
		AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
	if v.AffinityTimeout > 0 {
		svc.Flags |= 0x0001 // IP_VS_SVC_F_PERSISTENT
		svc.Timeout = v.AffinityTimeout
	}
	return svc
}

func protoNumber(p v1.Protocol) uint16 { return uint16(state.ProtocolNumber(p)) }

func protoName(n uint16) string {
	switch n {
	case unix.IPPROTO_UDP:
		return string(v1.ProtocolUDP)
	case unix.IPPROTO_SCTP:
		return string(v1.ProtocolSCTP)
	}
	return string(v1.ProtocolTCP)
}

// Cleanup removes what IPVS mode owns in the current network namespace: the virtual servers on the dummy
// interface's addresses, the interface and the ipsets. The iptables chains are removed by iptables.Cleanup,
// which must run first (the rules reference the ipsets). It works, and does nothing for IPVS, on a kernel
// without ip_vs.
func Cleanup(ctx context.Context) error {
	var errs []error
	if link, err := netlink.LinkByName(Interface); err == nil {
		if Available() == nil {
			if h, err := ipvs.New(""); err == nil {
				addrs, _ := netlink.AddrList(link, netlink.FAMILY_V4)
				svcs, _ := h.GetServices()
				for _, svc := range svcs {
					for _, a := range addrs {
						if a.IP.Equal(svc.Address) {
							errs = append(errs, h.DelService(svc))
						}
					}
				}
				h.Close()
			}
		}
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", Interface, err))
		}
	}
	if _, err := exec.LookPath("ipset"); err == nil {
		for _, set := range []string{SetClusterIP, SetLoopBack, SetNodePort, SetClusterIP + "-TMP", SetLoopBack + "-TMP", SetNodePort + "-TMP"} {
			if exec.CommandContext(ctx, "ipset", "list", "-n", set).Run() != nil {
				continue // not there
			}
			if out, err := exec.CommandContext(ctx, "ipset", "destroy", set).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ipset destroy %s: %w: %s", set, err, strings.TrimSpace(string(out))))
			}
		}
	}
	return errors.Join(errs...)
}
