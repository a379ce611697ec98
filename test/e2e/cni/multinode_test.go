package cni_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/cni/masq"
	"github.com/nodekit/nodekit/cni/portmap"
	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/test/framework/netns"
)

func nodeObject(name, podCIDR string, ip net.IP) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip.String()}}},
	}
}

// clusterCIDR is the pod network of these tests' nodes, the scope of their routes.
var _, clusterCIDR, _ = net.ParseCIDR("10.244.0.0/16")

// syncRoutes applies the host-gw routes derived from nodes on every node of envs, as each agent would.
func syncRoutes(t *testing.T, nodes []*corev1.Node, envs ...*env) {
	t.Helper()
	for _, e := range envs {
		err := e.node.Do(func() error {
			_, _, err := routes.Sync(routes.FromNodes(e.node.Name, nodes), clusterCIDR)
			return err
		})
		if err != nil {
			t.Fatalf("route sync on %s: %v", e.node.Name, err)
		}
	}
}

// TestTwoNodesHostGW: two nodes on one lab segment with host-gw routes from their Node objects; a pod on
// node A reaches a pod on node B by pod IP, unmasqueraded; removing node B's Node removes the route.
func TestTwoNodesHostGW(t *testing.T) {
	lab := netns.NewForTest(t, netns.Options{})
	a := newEnv(t, lab, "10.244.10.0/24", "10.244.0.0/16")
	b := newEnv(t, lab, "10.244.11.0/24", "10.244.0.0/16")
	nodes := []*corev1.Node{nodeObject(a.node.Name, "10.244.10.0/24", a.node.IP), nodeObject(b.node.Name, "10.244.11.0/24", b.node.IP)}
	syncRoutes(t, nodes, a, b)
	pa, pb := a.add(nil), b.add(nil)

	addr, seen := acceptOnce(t, pb.ns, pb.ip)
	if err := dialFrom(pa, addr); err != nil {
		t.Fatalf("pod %s on %s -> pod %s on %s: %v", pa.ip, a.node.Name, pb.ip, b.node.Name, err)
	}
	if got := <-seen; got != pa.ip.String() {
		t.Errorf("pod B saw the connection from %s, want pod A's own IP %s (no masquerade inside the cluster CIDR)", got, pa.ip)
	}

	// Node B leaves: node A's route to its podCIDR goes, and nothing else of A's routing changes.
	syncRoutes(t, nodes[:1], a)
	err := a.node.Do(func() error {
		rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routes.Protocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		if len(rs) != 0 {
			t.Errorf("node A still has nodekit routes after node B left: %v", rs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(pa, addr); err == nil {
		t.Errorf("pod B still reachable from pod A without a route")
	}
}

// TestMasqueradeLeavingCluster: a pod's connection to an address outside the cluster CIDR (another node's
// lab IP) arrives from its node's IP, through nodekit's masquerade chain.
func TestMasqueradeLeavingCluster(t *testing.T) {
	lab := netns.NewForTest(t, netns.Options{})
	a := newEnv(t, lab, "10.244.12.0/24", "10.244.0.0/16")
	other := lab.MustAddNode(t, "outside")
	p := a.add(nil)
	addr, seen := acceptOnce(t, other.NS, other.IP)
	if err := dialFrom(p, addr); err != nil {
		t.Fatalf("pod -> %s: %v", addr, err)
	}
	if got := <-seen; got != a.node.IP.String() {
		t.Errorf("outside host saw %s, want the node IP %s", got, a.node.IP)
	}
	out, err := a.node.Command(context.Background(), "iptables", "-t", "nat", "-S", masq.ChainName(a.opts.NetworkName)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-d 10.244.0.0/16 -j RETURN") || !strings.Contains(string(out), "MASQUERADE") {
		t.Errorf("masquerade chain: %v\n%s", err, out)
	}
	// A second ADD leaves exactly one POSTROUTING jump.
	a.add(nil)
	out, _ = a.node.Command(context.Background(), "iptables", "-t", "nat", "-S", "POSTROUTING").CombinedOutput()
	if n := strings.Count(string(out), masq.ChainName(a.opts.NetworkName)); n != 1 {
		t.Errorf("POSTROUTING has %d jumps to the masquerade chain, want 1:\n%s", n, out)
	}
}

// acceptOnce listens on ip:0 inside n and reports the source IP of the first connection on seen.
func acceptOnce(t *testing.T, n ns.NetNS, ip net.IP) (addr string, seen <-chan string) {
	t.Helper()
	l, err := netns.Listen(n, "tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		ch <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
	}()
	return l.Addr().String(), ch
}

// dialFrom opens (and closes) a TCP connection to addr from inside the pod, within 5 s.
func dialFrom(p *pod, addr string) error {
	return p.ns.Do(func(_ ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// TestHostPort: a hostPort mapping reaches the pod through the node's IP, from another node (PREROUTING)
// and from the node itself (OUTPUT); DEL removes the rules.
func TestHostPort(t *testing.T) {
	lab := netns.NewForTest(t, netns.Options{})
	a := newEnv(t, lab, "10.244.13.0/24", "10.244.0.0/16")
	client := lab.MustAddNode(t, "client")
	const hostPort = 18080
	p := a.add(map[string]any{"portMappings": []map[string]any{{"hostPort": hostPort, "containerPort": 8080, "protocol": "tcp"}}})
	serveEcho(t, p.ns, net.JoinHostPort(p.ip.String(), "8080"))
	target := net.JoinHostPort(a.node.IP.String(), "18080")
	if err := netns.Echo(client.NS, target, 5*time.Second); err != nil {
		t.Errorf("other node -> hostPort %s: %v", target, err)
	}
	if err := netns.Echo(a.node.NS, target, 5*time.Second); err != nil {
		t.Errorf("the node itself -> hostPort %s: %v", target, err)
	}
	if err := a.del(p); err != nil {
		t.Fatal(err)
	}
	out, _ := a.node.Command(context.Background(), "iptables", "-t", "nat", "-S").CombinedOutput()
	if chain := portmap.PodChain(a.opts.NetworkName, p.rc.ContainerID, "eth0"); strings.Contains(string(out), chain) {
		t.Errorf("DEL left hostPort chain %s:\n%s", chain, out)
	}
	if err := netns.Echo(client.NS, target, time.Second); err == nil {
		t.Errorf("hostPort still answers after DEL")
	}
}
