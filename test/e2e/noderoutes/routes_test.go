// Package noderoutes_test runs the agent's host-gw route controller (podroutes) against a real API server,
// with the nodes' credentials, in network namespaces wired to one lab bridge (real netlink).
package noderoutes_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/cni/routes"
	"github.com/nodekit/nodekit/podroutes"
	"github.com/nodekit/nodekit/test/framework/apiserver"
	"github.com/nodekit/nodekit/test/framework/netns"
)

var _, clusterCIDR, _ = net.ParseCIDR("10.246.0.0/16")

// nodeRoutes lists the nodekit routes of netNS as "dst via gw", sorted.
func nodeRoutes(t *testing.T, netNS ns.NetNS) []string {
	t.Helper()
	var out []string
	err := netNS.Do(func(ns.NetNS) error {
		rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routes.Protocol}, netlink.RT_FILTER_PROTOCOL)
		for _, r := range rs {
			out = append(out, r.Dst.String()+" via "+r.Gw.String())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// waitRoutes waits until netNS holds exactly want (sorted "dst via gw").
func waitRoutes(t *testing.T, what string, netNS ns.NetNS, want ...string) {
	t.Helper()
	sort.Strings(want)
	deadline := time.Now().Add(time.Minute)
	for {
		got := nodeRoutes(t, netNS)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: routes %v, want %v", what, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func createNode(t *testing.T, c kubernetes.Interface, name, podCIDR string, ip net.IP) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}}}
	n, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setIP(t, c, n, ip)
}

func setIP(t *testing.T, c kubernetes.Interface, n *corev1.Node, ip net.IP) {
	t.Helper()
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}, {Type: corev1.NodeInternalIP, Address: ip.String()}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// run starts node's route controller with its own credentials (system:node:<name>, which reads all Nodes
// only through the bootstrap ClusterRoleBinding podnet.RouteReaderRole) until the test ends.
func run(t *testing.T, api *apiserver.Server, node *netns.Node) {
	t.Helper()
	client := api.NodeClient(t, node.Name)
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rc, err := podroutes.New(podroutes.Config{Client: client, NodeName: node.Name, ClusterCIDR: clusterCIDR, NetNS: node.NS,
		Resync: time.Second, Recorder: events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nodekit-routes", Host: node.Name})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("route controller of %s: %v", node.Name, err)
		}
		events.Shutdown()
	})
}

// TestHostGWRoutes: each node routes the other nodes' podCIDRs via their InternalIPs; a changed address
// replaces the route, a deleted Node's route goes and a recreated one with another podCIDR gets a new one;
// a route deleted by hand comes back at the resync; a node whose address is behind a gateway is refused
// (Warning event on its Node, no route); stopped, the controller leaves the routes in place.
func TestHostGWRoutes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	api := apiserver.Start(t, apiserver.Options{})
	admin := api.Client
	lab := netns.NewForTest(t, netns.Options{Subnet: "10.197.0.0/24"})
	a, b := lab.MustAddNode(t, "rt-a"), lab.MustAddNode(t, "rt-b")
	// a reaches 10.99.0.0/16 through a gateway on the lab segment: not one L2 segment with a node there
	err := a.NS.Do(func(ns.NetNS) error {
		_, far, _ := net.ParseCIDR("10.99.0.0/16")
		return netlink.RouteAdd(&netlink.Route{Dst: far, Gw: net.ParseIP("10.197.0.1")})
	})
	if err != nil {
		t.Fatal(err)
	}
	createNode(t, admin, a.Name, "10.246.1.0/24", a.IP)
	createNode(t, admin, b.Name, "10.246.2.0/24", b.IP)
	createNode(t, admin, "rt-far", "10.246.3.0/24", net.ParseIP("10.99.0.5"))
	t.Cleanup(func() {
		for _, n := range []string{a.Name, b.Name, "rt-far"} {
			_ = admin.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	start := time.Now()
	run(t, api, a)
	run(t, api, b)
	waitRoutes(t, "a, first sync", a.NS, "10.246.2.0/24 via "+b.IP.String())
	waitRoutes(t, "b, first sync", b.NS, "10.246.1.0/24 via "+a.IP.String())
	t.Logf("routes on both nodes %v after the controllers started", time.Since(start).Round(time.Millisecond))

	// rt-far is refused on a: a Warning event on its Node says why.
	deadline := time.Now().Add(time.Minute)
	for {
		evs, err := admin.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=rt-far,reason=" + podroutes.ReasonUnreachable})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range evs.Items { // b refuses rt-far too (it has no route there at all)
			if ev.Source.Host != a.Name {
				continue
			}
			if m := ev.Message; ev.Type != corev1.EventTypeWarning || !strings.Contains(m, "from rt-a") || !strings.Contains(m, "not on a directly connected network") {
				t.Fatalf("event on rt-far: %s %q", ev.Type, m)
			}
			found = true
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no HostGatewayUnreachable event from rt-a on rt-far")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// b's address changes: a's route follows.
	nb, err := admin.CoreV1().Nodes().Get(context.Background(), b.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := net.ParseIP("10.197.0.50").To4()
	setIP(t, admin, nb, moved)
	waitRoutes(t, "a after b's InternalIP changed", a.NS, "10.246.2.0/24 via "+moved.String())

	// a route removed by hand is back at the next resync
	err = a.NS.Do(func(ns.NetNS) error {
		_, dst, _ := net.ParseCIDR("10.246.2.0/24")
		return netlink.RouteDel(&netlink.Route{Dst: dst, Gw: moved, Protocol: routes.Protocol})
	})
	if err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, "a after its route was deleted by hand", a.NS, "10.246.2.0/24 via "+moved.String())

	// b's Node is deleted: its route goes; recreated with another podCIDR, the new one comes.
	if err := admin.CoreV1().Nodes().Delete(context.Background(), b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, "a after b's Node was deleted", a.NS)
	createNode(t, admin, b.Name, "10.246.4.0/24", b.IP)
	waitRoutes(t, "a after b came back with another podCIDR", a.NS, "10.246.4.0/24 via "+b.IP.String())
	if got := nodeRoutes(t, b.NS); fmt.Sprint(got) != "[10.246.1.0/24 via "+a.IP.String()+"]" {
		t.Errorf("b's routes %v: its own podCIDR must never be routed", got)
	}
}
