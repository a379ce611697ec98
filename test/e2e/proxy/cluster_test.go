package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/proxy"
	"github.com/nodekit/nodekit/proxy/ipvs"
	"github.com/nodekit/nodekit/proxy/state"
	"github.com/nodekit/nodekit/test/framework/netns"
)

// The simulated cluster: two nodes on the lab segment 10.201.0.0/24 (node1 .2, node2 .3), each with a pod
// bridge nkbr0 (node1 10.244.1.1/24, node2 10.244.2.1/24) and routes to the other node's pods, like a
// host-gw network. The proxy under test runs for node1, in node1's namespace.
const (
	clusterCIDR = "10.244.0.0/16"
	labSubnet   = "10.201.0.0/24"
	podBridge   = "nkbr0"
)

type pod struct {
	name string
	node *netns.Node
	ns   ns.NetNS
	ip   netip.Addr
}

type cluster struct {
	t            *testing.T
	lab          *netns.Lab
	node1, node2 *netns.Node
	client       kubernetes.Interface // writes Services and EndpointSlices
	proxyClient  kubernetes.Interface // what the proxy watches with
	nextIP       map[string]int
	// iptablesBefore is node1's iptables-save (without counters) before any proxy ran, nftTablesBefore its
	// nf_tables tables.
	iptablesBefore  string
	nftTablesBefore []string
	// mode is the proxy mode under test.
	mode proxy.Mode
}

// eachMode runs test once per proxy mode, as subtests named after the mode, each on a fresh cluster. A mode
// this kernel cannot run is skipped with the reason (IPVS without the ip_vs module).
func eachMode(t *testing.T, test func(*testing.T, *cluster)) {
	for _, m := range proxy.Modes {
		t.Run(string(m), func(t *testing.T) {
			if m == proxy.ModeIPVS {
				if err := ipvs.Available(); err != nil {
					t.Skip(err)
				}
			}
			c := newCluster(t)
			c.mode = m
			test(t, c)
		})
	}
}

// nftTables lists the node's nf_tables tables as "family name", sorted.
func (c *cluster) nftTables(n *netns.Node) []string {
	c.t.Helper()
	var out []string
	err := n.Do(func() error {
		conn, err := nftables.New()
		if err != nil {
			return err
		}
		tables, err := conn.ListTables()
		for _, t := range tables {
			out = append(out, fmt.Sprintf("%d %s", t.Family, t.Name))
		}
		return err
	})
	if err != nil {
		c.t.Fatalf("list nf_tables tables of %s: %v", n.Name, err)
	}
	slices.Sort(out)
	return out
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and iptables rules")
	}
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore not installed")
	}
}

func newCluster(t *testing.T) *cluster {
	requireRoot(t)
	lab := netns.NewForTest(t, netns.Options{Subnet: labSubnet})
	admin, node := newClients(t)
	c := &cluster{t: t, lab: lab, client: admin, proxyClient: node, nextIP: map[string]int{}}
	c.node1 = lab.MustAddNode(t, "node1")
	c.node2 = lab.MustAddNode(t, "node2")
	c.setupNode(c.node1, "10.244.1.1/24", "10.244.2.0/24", c.node2.IP)
	c.setupNode(c.node2, "10.244.2.1/24", "10.244.1.0/24", c.node1.IP)
	// Rules a node has before the proxy (like a CNI's masquerade), which the proxy must leave alone.
	c.run(c.node1, "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "10.244.1.0/24", "!", "-d", clusterCIDR, "-j", "MASQUERADE")
	c.run(c.node1, "iptables", "-A", "FORWARD", "-s", clusterCIDR, "-j", "ACCEPT")
	c.iptablesBefore = c.iptablesSave(c.node1)
	c.nftTablesBefore = c.nftTables(c.node1)
	return c
}

func (c *cluster) run(n *netns.Node, name string, args ...string) string {
	c.t.Helper()
	out, err := n.Command(context.Background(), name, args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s %v in %s: %v: %s", name, args, n.Name, err, out)
	}
	return string(out)
}

// iptablesSave returns the node's rules without comments and counters.
func (c *cluster) iptablesSave(n *netns.Node) string {
	out := c.run(n, "iptables-save")
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, ":") { // ":CHAIN POLICY [pkts:bytes]"
			if i := strings.LastIndex(l, " ["); i > 0 {
				l = l[:i]
			}
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func (c *cluster) setupNode(n *netns.Node, bridgeAddr, otherPods string, otherNode net.IP) {
	err := n.Do(func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return err
		}
		la := netlink.NewLinkAttrs()
		la.Name = podBridge
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return err
		}
		br, err := netlink.LinkByName(podBridge)
		if err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(bridgeAddr)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(br, addr); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(br); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR(otherPods)
		if err := netlink.RouteAdd(&netlink.Route{Dst: dst, Gw: otherNode}); err != nil {
			return fmt.Errorf("route %s via %s: %w", otherPods, otherNode, err)
		}
		// A default route, as every node has: Service IPs without endpoints are routed and then REJECTed.
		gw := netip.MustParsePrefix(labSubnet).Addr().Next()
		return netlink.RouteAdd(&netlink.Route{Gw: gw.AsSlice()})
	})
	if err != nil {
		c.t.Fatalf("set up %s: %v", n.Name, err)
	}
}

// addPod creates a pod namespace on node n with eth0 on the node's pod bridge (hairpin mode on its bridge
// port, as the CNI bridge plugin's hairpinMode sets) and a default route via the bridge.
func (c *cluster) addPod(n *netns.Node, name string) *pod {
	c.t.Helper()
	podNS, err := c.lab.NewPodNS()
	if err != nil {
		c.t.Fatal(err)
	}
	subnet := "10.244.1."
	if n == c.node2 {
		subnet = "10.244.2."
	}
	c.nextIP[subnet]++
	ip := netip.MustParseAddr(fmt.Sprintf("%s%d", subnet, 10+c.nextIP[subnet]))
	gw := net.ParseIP(subnet + "1")
	hostIf := "v" + name
	err = n.Do(func() error {
		la := netlink.NewLinkAttrs()
		la.Name = hostIf
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(podNS.Fd()))}); err != nil {
			return err
		}
		l, err := netlink.LinkByName(hostIf)
		if err != nil {
			return err
		}
		br, err := netlink.LinkByName(podBridge)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMaster(l, br); err != nil {
			return err
		}
		if err := netlink.LinkSetHairpin(l, true); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err == nil {
		err = podNS.Do(func(ns.NetNS) error {
			for _, name := range []string{"lo", "eth0"} {
				l, err := netlink.LinkByName(name)
				if err != nil {
					return err
				}
				if name == "eth0" {
					a, _ := netlink.ParseAddr(ip.String() + "/24")
					if err := netlink.AddrAdd(l, a); err != nil {
						return err
					}
				}
				if err := netlink.LinkSetUp(l); err != nil {
					return err
				}
			}
			return netlink.RouteAdd(&netlink.Route{Gw: gw})
		})
	}
	if err != nil {
		c.t.Fatalf("pod %s on %s: %v", name, n.Name, err)
	}
	return &pod{name: name, node: n, ns: podNS, ip: ip}
}

// serveTCP answers every connection on port with "<pod name> <client ip>".
func (c *cluster) serveTCP(p *pod, port int) {
	c.t.Helper()
	l, err := netns.Listen(p.ns, "tcp", netip.AddrPortFrom(p.ip, uint16(port)).String())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
			_, _ = conn.Write([]byte(p.name + " " + host))
			conn.Close()
		}
	}()
}

// serveUDP answers every datagram on port with "<pod name>".
func (c *cluster) serveUDP(p *pod, port int) {
	c.t.Helper()
	var pc net.PacketConn
	err := p.ns.Do(func(ns.NetNS) error {
		var err error
		pc, err = net.ListenPacket("udp", netip.AddrPortFrom(p.ip, uint16(port)).String())
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(p.name), from)
		}
	}()
}

// request connects from netNS to addr over TCP and returns the reply ("<pod> <client ip>").
func request(netNS ns.NetNS, addr string) (string, error) {
	var conn net.Conn
	err := netNS.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 3*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(conn)
	return string(b), err
}

// requestFromNode is request from a node's own namespace.
func requestFromNode(n *netns.Node, addr string) (string, error) {
	var out string
	err := n.Do(func() error {
		var err error
		out, err = requestHere(addr)
		return err
	})
	return out, err
}

func requestHere(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(conn)
	return string(b), err
}

// spread sends n requests and counts replies per pod name; it fails the test on any error.
func spread(t *testing.T, n int, do func() (string, error)) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		out, err := do()
		if err != nil {
			t.Fatalf("request %d/%d: %v", i+1, n, err)
		}
		counts[strings.Fields(out + " ?")[0]]++
	}
	return counts
}

// createService creates svc (in "default") and returns it as stored, with its ClusterIP.
func (c *cluster) createService(svc *v1.Service) *v1.Service {
	c.t.Helper()
	svc.Namespace = "default"
	prepareService(c.t, svc)
	out, err := c.client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return out
}

// setEndpoints writes the Service's one EndpointSlice: one port named portName, the pods ready.
func (c *cluster) setEndpoints(svc, portName string, proto v1.Protocol, port int32, pods ...*pod) {
	c.t.Helper()
	es := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-nk", Namespace: "default", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}
	ready := true
	for _, p := range pods {
		node := p.node.Name
		es.Endpoints = append(es.Endpoints, discovery.Endpoint{Addresses: []string{p.ip.String()},
			Conditions: discovery.EndpointConditions{Ready: &ready}, NodeName: &node})
	}
	ctx := context.Background()
	cur, err := c.client.DiscoveryV1().EndpointSlices("default").Get(ctx, es.Name, metav1.GetOptions{})
	if err == nil {
		es.ResourceVersion = cur.ResourceVersion
		_, err = c.client.DiscoveryV1().EndpointSlices("default").Update(ctx, es, metav1.UpdateOptions{})
	} else {
		_, err = c.client.DiscoveryV1().EndpointSlices("default").Create(ctx, es, metav1.CreateOptions{})
	}
	if err != nil {
		c.t.Fatalf("endpoint slice for %s: %v", svc, err)
	}
}

// startProxy runs a Proxier for node1 until the test ends (or stop is called) and returns it.
func (c *cluster) startProxy() (p *proxy.Proxier, stop func()) {
	return c.startProxyWith(func(*proxy.Config) {})
}

// startProxyWith is startProxy with the configuration adjusted by mutate.
func (c *cluster) startProxyWith(mutate func(*proxy.Config)) (p *proxy.Proxier, stop func()) {
	c.t.Helper()
	cfg := proxy.Config{
		Client: c.proxyClient, Mode: c.mode, NodeName: c.node1.Name, ClusterCIDR: clusterCIDR,
		MinSyncPeriod: 50 * time.Millisecond, SyncPeriod: time.Minute, MetricsAddr: "127.0.0.1:0", NetNS: c.node1.NS,
	}
	mutate(&cfg)
	p, err := proxy.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.Run(ctx); err != nil {
			c.t.Errorf("proxy run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	c.t.Cleanup(stop)
	return p, stop
}

// waitApplied waits (at most 20 s) until the proxy's last completed sync satisfies ok.
func waitApplied(t *testing.T, p *proxy.Proxier, what string, ok func(*state.Snapshot) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if s := p.Applied(); s != nil && ok(s) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("proxy did not apply %s within 20s", what)
}

// endpointsOf returns the endpoint IPs of the named service's ports in snap, and whether it exists.
func endpointsOf(s *state.Snapshot, svc string) ([]string, bool) {
	for _, sp := range s.Ports {
		if sp.Name.Name == svc {
			var ips []string
			for _, e := range sp.Endpoints {
				ips = append(ips, e.IP.String())
			}
			return ips, true
		}
	}
	return nil, false
}

func hasEndpoints(svc string, pods ...*pod) func(*state.Snapshot) bool {
	return func(s *state.Snapshot) bool {
		ips, ok := endpointsOf(s, svc)
		if !ok || len(ips) != len(pods) {
			return false
		}
		for i, p := range pods {
			if ips[i] != p.ip.String() {
				return false
			}
		}
		return true
	}
}

func isRefused(err error) bool {
	return err != nil && errors.Is(err, syscall.ECONNREFUSED)
}
