package nftables

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/proxy/state"
)

func rulesOf(rs *Ruleset, chain string) string {
	c, ok := rs.Chains[chain]
	if !ok {
		return "<no chain " + chain + ">"
	}
	return c.content()
}

func elementsOf(rs *Ruleset) string {
	var b strings.Builder
	for _, m := range keys(rs.Maps) {
		for _, k := range keys(rs.Maps[m]) {
			fmt.Fprintf(&b, "%s: %s\n", m, rs.Maps[m][k].Text)
		}
	}
	return b.String()
}

// TestBuild checks the rules of each kind of service port against the iptables backend's behaviour.
func TestBuild(t *testing.T) {
	cidr := netip.MustParsePrefix("10.244.0.0/16")
	sticky := port("sticky", "10.96.0.1", 80, v1.ProtocolTCP, "10.244.1.1", "10.244.1.2")
	sticky.AffinityTimeout = 600
	local := port("local", "10.96.0.2", 80, v1.ProtocolTCP, "10.244.1.3", "10.244.2.3")
	local.Endpoints[0].Local = true
	local.NodePort, local.ExternalLocal = 30080, true
	local.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.7")}
	none := port("none", "10.96.0.3", 53, v1.ProtocolUDP)
	none.NodePort = 30053
	remoteOnly := port("remote", "10.96.0.4", 80, v1.ProtocolTCP, "10.244.2.4")
	remoteOnly.NodePort, remoteOnly.ExternalLocal = 30081, true

	rs := Build(&state.Snapshot{Ports: []*state.ServicePort{sticky, local, none, remoteOnly}}, Config{ClusterCIDR: cidr})
	e0, e1 := EndpointChain(sticky, sticky.Endpoints[0]), EndpointChain(sticky, sticky.Endpoints[1])
	s0 := AffinitySet(sticky, sticky.Endpoints[0])
	for chain, want := range map[string]string{
		ServiceChain(sticky): "ip daddr 10.96.0.1 meta l4proto tcp th dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade\n" +
			"ip saddr @" + s0 + " goto " + e0 + "\n" +
			"ip saddr @" + AffinitySet(sticky, sticky.Endpoints[1]) + " goto " + e1 + "\n" +
			"numgen random mod 2 vmap { 0 : goto " + e0 + ", 1 : goto " + e1 + " }\n",
		e0: "ip saddr 10.244.1.1 jump mark-for-masquerade\nupdate @" + s0 + " { ip saddr }\nmeta l4proto tcp dnat to 10.244.1.1:8080\n",
		ExternalChain(local): "ip saddr 10.244.0.0/16 goto " + ServiceChain(local) + "\n" +
			"fib saddr type local jump mark-for-masquerade\n" +
			"fib saddr type local goto " + ServiceChain(local) + "\n" +
			"goto " + LocalChain(local) + "\n",
		LocalChain(local): "goto " + EndpointChain(local, local.Endpoints[0]) + "\n",
		chainServices: "ip daddr . meta l4proto . th dport vmap @service-ips\n" +
			"fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports\n",
	} {
		if got := rulesOf(rs, chain); got != want {
			t.Errorf("chain %s:\n%s\nwant:\n%s", chain, got, want)
		}
	}
	if rs.Affinity[s0].Seconds() != 600 {
		t.Errorf("affinity set %s timeout %s, want 600s", s0, rs.Affinity[s0])
	}
	wantElements := "no-endpoint-nodeports: tcp . 30081 : drop\n" +
		"no-endpoint-nodeports: udp . 30053 : goto reject-chain\n" +
		"no-endpoint-services: 10.96.0.3 . udp . 53 : goto reject-chain\n" +
		"service-ips: 10.96.0.1 . tcp . 80 : goto " + ServiceChain(sticky) + "\n" +
		"service-ips: 10.96.0.2 . tcp . 80 : goto " + ServiceChain(local) + "\n" +
		"service-ips: 10.96.0.4 . tcp . 80 : goto " + ServiceChain(remoteOnly) + "\n" +
		"service-ips: 192.0.2.7 . tcp . 80 : goto " + ExternalChain(local) + "\n" +
		"service-nodeports: tcp . 30080 : goto " + ExternalChain(local) + "\n"
	if got := elementsOf(rs); got != wantElements {
		t.Errorf("map elements:\n%s\nwant:\n%s", got, wantElements)
	}
	if _, ok := rs.Chains[ExternalChain(remoteOnly)]; ok {
		t.Errorf("policy Local port with no local endpoint has an external chain")
	}

	localhost := Build(&state.Snapshot{}, Config{LocalhostNodePorts: true})
	if got := rulesOf(localhost, chainServices); strings.Contains(got, "127.0.0.0/8") {
		t.Errorf("localhost NodePorts still excludes 127.0.0.0/8:\n%s", got)
	}
}

func manyPorts(n int) []*state.ServicePort {
	var out []*state.ServicePort
	for i := 0; i < n; i++ {
		sp := port(fmt.Sprintf("s%05d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), 80, v1.ProtocolTCP,
			fmt.Sprintf("10.244.%d.%d", i/250, i%250+1), fmt.Sprintf("10.245.%d.%d", i/250, i%250+1))
		sp.NodePort = int32(30000 + i)
		out = append(out, sp)
	}
	return out
}

// TestOneServiceChangeTouchesOnlyIt: among 1000 Services, changing, adding or removing one writes only that
// Service's chains and map elements, in a handful of netlink messages.
func TestOneServiceChangeTouchesOnlyIt(t *testing.T) {
	cfg := Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	base := manyPorts(1000)
	old := Build(&state.Snapshot{Ports: base}, cfg)

	changed := append([]*state.ServicePort{}, base...)
	sp := *base[500]
	sp.Endpoints = sp.Endpoints[:1]
	changed[500] = &sp
	added := append(append([]*state.ServicePort{}, base...), port("zz-new", "10.97.0.1", 80, v1.ProtocolTCP, "10.246.0.1"))
	removed := append(append([]*state.ServicePort{}, base[:500]...), base[501:]...)

	for _, tc := range []struct {
		name  string
		ports []*state.ServicePort
		mark  []string // every op names one of these
		max   int      // messages
	}{
		{"endpoint removed", changed, []string{portID(base[500])}, 4},
		{"service added", added, []string{"default/zz-new/", "10.97.0.1 ."}, 8},
		{"service removed", removed, []string{portID(base[500]), "10.96.2.1 .", "tcp . 30500 "}, 8},
	} {
		units := planPartial(old, Build(&state.Snapshot{Ports: tc.ports}, cfg))
		res := summarize(units)
		var lines []string
		for _, u := range units {
			for _, o := range u {
				s := o.String()
				lines = append(lines, s)
				ok := false
				for _, m := range tc.mark {
					ok = ok || strings.Contains(s, m)
				}
				if !ok {
					t.Errorf("%s: op %q is not about the changed Service", tc.name, s)
				}
			}
		}
		t.Logf("%s: %d messages:\n%s", tc.name, res.Messages, strings.Join(lines, "\n"))
		if res.Messages == 0 || res.Messages > tc.max {
			t.Errorf("%s: %d netlink messages, want 1..%d", tc.name, res.Messages, tc.max)
		}
	}
	if units := planPartial(old, Build(&state.Snapshot{Ports: base}, cfg)); len(units) != 0 {
		t.Errorf("unchanged state planned %d units", len(units))
	}
}

// TestBatchesKeepUnitsWhole: a cut never separates a chain's flush from its rules, and keeps the order.
func TestBatchesKeepUnitsWhole(t *testing.T) {
	rs := Build(&state.Snapshot{Ports: manyPorts(20)}, Config{})
	units := planFull(rs, tableState{chains: map[string]bool{ServiceChain(manyPorts(1)[0]): true, "service-stale": true}})
	var flat []string
	for _, u := range units {
		for _, o := range u {
			flat = append(flat, o.String())
		}
	}
	var got []string
	bs := batches(units, 5)
	for i, b := range bs {
		n := 0
		for _, o := range b {
			n += o.messages()
			got = append(got, o.String())
		}
		if n > 5 && len(b) > 1 && b[0].kind != opFlushChain {
			t.Errorf("batch of %d messages over the cap of 5 not being one unit: %v", n, b)
		}
		if i > 0 && (b[0].kind == opAddRule || b[0].kind == opAddElements) && bs[i-1][len(bs[i-1])-1].name == b[0].name {
			t.Errorf("batch %d continues the refill of %s begun in the batch before", i, b[0].name)
		}
	}
	if strings.Join(got, "\n") != strings.Join(flat, "\n") {
		t.Errorf("batches reorder or lose ops")
	}
	if last := flat[len(flat)-1]; last != "delete chain ip nodekit-proxy service-stale" {
		t.Errorf("stale chain not deleted last: %q", last)
	}
}
