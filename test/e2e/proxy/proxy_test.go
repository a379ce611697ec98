// Package proxy_test runs nodekit's service proxy in every mode (iptables, ipvs, nftables) against real
// iptables, nf_tables, conntrack and network namespaces: a simulated two-node cluster (test/framework/netns) with pods as namespaces on a
// bridge per node, Services and EndpointSlices written through the API client, and traffic measured from
// client pods and nodes.
package proxy_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/proxy"
	"github.com/nodekit/nodekit/proxy/state"
)

func tcpService(name string, port int32) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{{
			Name: "http", Port: port, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("http"),
		}}},
	}
}

func addr(svc *v1.Service) string {
	return net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
}

// TestClusterIPSpreadScaleAndReject: 300 requests spread over 3 backends (each ≥ 50); scaled to one
// backend all go there; scaled to none, connections are refused at once (REJECT), not left to time out.
func TestClusterIPSpreadScaleAndReject(t *testing.T) { eachMode(t, testClusterIPSpreadScaleAndReject) }

func testClusterIPSpreadScaleAndReject(t *testing.T, c *cluster) {
	a, b, d := c.addPod(c.node1, "a"), c.addPod(c.node1, "b"), c.addPod(c.node1, "c")
	client := c.addPod(c.node1, "client")
	for _, p := range []*pod{a, b, d} {
		c.serveTCP(p, 8080)
	}
	p, _ := c.startProxy()
	svc := c.createService(tcpService("web", 80))
	c.setEndpoints("web", "http", v1.ProtocolTCP, 8080, a, b, d)
	waitApplied(t, p, "3 endpoints", hasEndpoints("web", a, b, d))

	counts := spread(t, 300, func() (string, error) { return request(client.ns, addr(svc)) })
	t.Logf("300 requests over 3 endpoints: %v", counts)
	for _, name := range []string{"a", "b", "c"} {
		if counts[name] < 50 {
			t.Errorf("backend %s got %d of 300 requests, want >= 50 (%v)", name, counts[name], counts)
		}
	}

	c.setEndpoints("web", "http", v1.ProtocolTCP, 8080, b)
	waitApplied(t, p, "1 endpoint", hasEndpoints("web", b))
	if counts := spread(t, 100, func() (string, error) { return request(client.ns, addr(svc)) }); counts["b"] != 100 {
		t.Errorf("scaled to b only, got %v", counts)
	}

	c.setEndpoints("web", "http", v1.ProtocolTCP, 8080)
	waitApplied(t, p, "0 endpoints", hasEndpoints("web"))
	start := time.Now()
	_, err := request(client.ns, addr(svc))
	took := time.Since(start)
	if !isRefused(err) {
		t.Fatalf("with no endpoints: err = %v, want connection refused", err)
	}
	if took > time.Second {
		t.Errorf("refusal took %s; REJECT should answer at once", took)
	}
	t.Logf("no endpoints: %v after %s", err, took)
}

// TestNodePortAndExternalTrafficPolicyLocal: a NodePort answers on node1's IP from node1 itself and from
// node2, balancing over endpoints on both nodes (masqueraded), and on 127.0.0.1 when localhost NodePorts are
// enabled; with externalTrafficPolicy Local only the local endpoint answers, and it sees the real client
// address.
func TestNodePortAndExternalTrafficPolicyLocal(t *testing.T) {
	eachMode(t, testNodePortAndExternalTrafficPolicyLocal)
}

func testNodePortAndExternalTrafficPolicyLocal(t *testing.T, c *cluster) {
	local, remote := c.addPod(c.node1, "local"), c.addPod(c.node2, "remote")
	c.serveTCP(local, 8080)
	c.serveTCP(remote, 8080)
	p, _ := c.startProxyWith(func(cfg *proxy.Config) { cfg.LocalhostNodePorts = true })

	cluster := tcpService("np-cluster", 80)
	cluster.Spec.Type = v1.ServiceTypeNodePort
	cluster.Spec.Ports[0].NodePort = 30080
	c.createService(cluster)
	c.setEndpoints("np-cluster", "http", v1.ProtocolTCP, 8080, local, remote)
	localSvc := tcpService("np-local", 80)
	localSvc.Spec.Type = v1.ServiceTypeNodePort
	localSvc.Spec.Ports[0].NodePort = 30081
	localSvc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	c.createService(localSvc)
	c.setEndpoints("np-local", "http", v1.ProtocolTCP, 8080, local, remote)
	waitApplied(t, p, "node port services", func(s *state.Snapshot) bool {
		return hasEndpoints("np-cluster", local, remote)(s) && hasEndpoints("np-local", local, remote)(s)
	})

	nodePort := net.JoinHostPort(c.node1.IP.String(), "30080")
	fromNode1 := spread(t, 60, func() (string, error) { return requestFromNode(c.node1, nodePort) })
	fromNode2 := spread(t, 60, func() (string, error) { return requestFromNode(c.node2, nodePort) })
	t.Logf("NodePort %s (policy Cluster): from node1 %v, from node2 %v", nodePort, fromNode1, fromNode2)
	for _, counts := range []map[string]int{fromNode1, fromNode2} {
		if counts["local"] == 0 || counts["remote"] == 0 {
			t.Errorf("policy Cluster should reach both endpoints: %v", counts)
		}
	}

	if out, err := requestFromNode(c.node1, "127.0.0.1:30080"); err != nil || !strings.HasPrefix(out, "local ") && !strings.HasPrefix(out, "remote ") {
		t.Errorf("localhost NodePort: %q, %v", out, err)
	}

	nodePortLocal := net.JoinHostPort(c.node1.IP.String(), "30081")
	seen := map[string]int{}
	for i := 0; i < 60; i++ {
		out, err := requestFromNode(c.node2, nodePortLocal)
		if err != nil {
			t.Fatalf("policy Local request %d: %v", i, err)
		}
		seen[out]++
	}
	want := "local " + c.node2.IP.String()
	if seen[want] != 60 {
		t.Errorf("policy Local from node2: replies %v, want all %q (local endpoint, client IP preserved)", seen, want)
	}
}

// TestSessionAffinityClientIP: with sessionAffinity ClientIP every request of one client reaches the same
// backend.
func TestSessionAffinityClientIP(t *testing.T) { eachMode(t, testSessionAffinityClientIP) }

func testSessionAffinityClientIP(t *testing.T, c *cluster) {
	pods := []*pod{c.addPod(c.node1, "a"), c.addPod(c.node1, "b"), c.addPod(c.node1, "c")}
	client := c.addPod(c.node1, "client")
	for _, p := range pods {
		c.serveTCP(p, 8080)
	}
	p, _ := c.startProxy()
	s := tcpService("sticky", 80)
	s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
	svc := c.createService(s)
	c.setEndpoints("sticky", "http", v1.ProtocolTCP, 8080, pods...)
	waitApplied(t, p, "sticky endpoints", hasEndpoints("sticky", pods...))
	counts := spread(t, 60, func() (string, error) { return request(client.ns, addr(svc)) })
	if len(counts) != 1 {
		t.Errorf("sessionAffinity ClientIP: replies spread over %v, want one backend", counts)
	}
	t.Logf("60 requests with ClientIP affinity: %v", counts)
}

// TestHairpin: a pod reaches itself through its own Service (masqueraded to the bridge address, since a
// packet from its own address would be dropped as martian).
func TestHairpin(t *testing.T) { eachMode(t, testHairpin) }

func testHairpin(t *testing.T, c *cluster) {
	a := c.addPod(c.node1, "a")
	c.serveTCP(a, 8080)
	p, _ := c.startProxy()
	svc := c.createService(tcpService("self", 80))
	c.setEndpoints("self", "http", v1.ProtocolTCP, 8080, a)
	waitApplied(t, p, "self endpoint", hasEndpoints("self", a))
	out, err := request(a.ns, addr(svc))
	if err != nil {
		t.Fatalf("pod a through its own Service: %v", err)
	}
	if out != "a 10.244.1.1" {
		t.Errorf("hairpin reply %q, want %q (a, seen from the masqueraded bridge address)", out, "a 10.244.1.1")
	}
}

// TestUDPBackendReplaced: a UDP client keeps its socket (same conntrack flow); after the Service's backend
// is replaced, its very next datagram reaches the new backend because the proxy flushed the stale conntrack
// entry. The old backend keeps running, so a stale entry would still be answered — by the wrong pod.
func TestUDPBackendReplaced(t *testing.T) { eachMode(t, testUDPBackendReplaced) }

func testUDPBackendReplaced(t *testing.T, c *cluster) {
	oldPod, newPod := c.addPod(c.node1, "old"), c.addPod(c.node1, "new")
	client := c.addPod(c.node1, "client")
	c.serveUDP(oldPod, 5353)
	c.serveUDP(newPod, 5353)
	p, _ := c.startProxy()
	svc := c.createService(&v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dns"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}}},
	})
	c.setEndpoints("dns", "dns", v1.ProtocolUDP, 5353, oldPod)
	waitApplied(t, p, "udp endpoint", hasEndpoints("dns", oldPod))

	var conn net.Conn
	if err := client.ns.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.Dial("udp", addr(svc))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func() string {
		t.Helper()
		if _, err := conn.Write([]byte("?")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("udp reply: %v", err)
		}
		return string(buf[:n])
	}
	for i := 0; i < 3; i++ {
		if got := ask(); got != "old" {
			t.Fatalf("before replacement: reply %q, want old", got)
		}
	}
	c.setEndpoints("dns", "dns", v1.ProtocolUDP, 5353, newPod)
	waitApplied(t, p, "replaced udp endpoint", hasEndpoints("dns", newPod))
	if got := ask(); got != "new" {
		t.Errorf("first datagram after replacement answered by %q, want new", got)
	}
}

// TestRestartKeepsTrafficAndCleanupRestores: traffic flows without a single failure while the proxy is
// stopped and a new one takes over; afterwards proxy.Cleanup leaves iptables-save exactly as before the
// proxy first ran (counters aside), and the node's nf_tables tables too (nftables mode's table is gone).
func TestRestartKeepsTrafficAndCleanupRestores(t *testing.T) {
	eachMode(t, testRestartKeepsTrafficAndCleanupRestores)
}

func testRestartKeepsTrafficAndCleanupRestores(t *testing.T, c *cluster) {
	a, b := c.addPod(c.node1, "a"), c.addPod(c.node1, "b")
	client := c.addPod(c.node1, "client")
	c.serveTCP(a, 8080)
	c.serveTCP(b, 8080)
	p1, stop1 := c.startProxy()
	svc := c.createService(tcpService("web", 80))
	c.setEndpoints("web", "http", v1.ProtocolTCP, 8080, a, b)
	waitApplied(t, p1, "endpoints", hasEndpoints("web", a, b))

	done := make(chan struct{})
	result := make(chan [2]int)
	go func() {
		ok, failed := 0, 0
		for i := 0; i < 2000; i++ { // bounded; normally ended by done
			select {
			case <-done:
				result <- [2]int{ok, failed}
				return
			default:
			}
			if _, err := request(client.ns, addr(svc)); err != nil {
				failed++
				t.Logf("request during restart: %v", err)
			} else {
				ok++
			}
		}
		result <- [2]int{ok, failed}
	}()
	time.Sleep(200 * time.Millisecond)
	stop1()
	time.Sleep(200 * time.Millisecond)
	p2, stop2 := c.startProxy()
	waitApplied(t, p2, "endpoints after restart", hasEndpoints("web", a, b))
	time.Sleep(200 * time.Millisecond)
	close(done)
	r := <-result
	t.Logf("during restart: %d requests ok, %d failed", r[0], r[1])
	if r[1] != 0 || r[0] < 10 {
		t.Errorf("restart: %d ok, %d failed; want no failure", r[0], r[1])
	}
	stop2()

	err := c.node1.Do(func() error { return proxy.Cleanup(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
	if after := c.iptablesSave(c.node1); after != c.iptablesBefore {
		t.Errorf("after cleanup iptables-save differs.\nafter:\n%s\nbefore:\n%s", after, c.iptablesBefore)
	}
	if strings.Contains(c.run(c.node1, "iptables-save"), "NODEKIT") {
		t.Error("NODEKIT rules left after cleanup")
	}
	if after := c.nftTables(c.node1); !slices.Equal(after, c.nftTablesBefore) {
		t.Errorf("after cleanup nf_tables tables are %v, want %v as before the proxy ran", after, c.nftTablesBefore)
	}
}
