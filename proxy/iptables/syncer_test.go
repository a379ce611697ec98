package iptables

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/proxy/internal/testns"
	"github.com/nodekit/nodekit/proxy/state"
)

// newNodeNS creates a network namespace for the test and removes it on cleanup.
func saveAll(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func port(name string, cip string, p int32, proto v1.Protocol, eps ...string) *state.ServicePort {
	sp := &state.ServicePort{
		Name:      state.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}, Protocol: proto},
		ClusterIP: netip.MustParseAddr(cip), Port: p, Protocol: proto,
	}
	for _, e := range eps {
		sp.Endpoints = append(sp.Endpoints, state.Endpoint{IP: netip.MustParseAddr(e), Port: 8080, Ready: true, Serving: true})
	}
	return sp
}

func TestSyncPartialAndCleanup(t *testing.T) {
	node := testns.New(t)
	err := node.Do(func(ns.NetNS) error {
		ctx := context.Background()
		// A pre-existing rule of another owner, which nodekit must leave alone.
		if out, err := exec.Command("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "10.99.0.0/16", "-j", "RETURN").CombinedOutput(); err != nil {
			t.Fatalf("seed rule: %v %s", err, out)
		}
		if out, err := exec.Command("iptables", "-A", "FORWARD", "-s", "10.99.0.0/16", "-j", "ACCEPT").CombinedOutput(); err != nil {
			t.Fatalf("seed rule: %v %s", err, out)
		}
		before := saveAll(t)

		s, err := New(Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := port("a", "10.96.0.10", 80, v1.ProtocolTCP, "10.244.1.1", "10.244.1.2")
		b := port("b", "10.96.0.11", 53, v1.ProtocolUDP, "10.244.1.3")
		c := port("c", "10.96.0.12", 80, v1.ProtocolTCP)
		c.AffinityTimeout = 30
		res, err := s.Sync(ctx, &state.Snapshot{Ports: []*state.ServicePort{a, b, c}}, false)
		if err != nil {
			t.Fatal(err)
		}
		saved := saveAll(t)
		for _, want := range []string{
			"-A NODEKIT-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80",
			"-j " + svcChain(a),
			"--probability 0.50000000000 -j " + sepChain(a, a.Endpoints[0]),
			"-j DNAT --to-destination 10.244.1.3:8080",
			"-A NODEKIT-SERVICES -d 10.96.0.12/32 -p tcp -m tcp --dport 80 -m comment --comment \"default/c:/TCP has no endpoints\" -j REJECT",
			"-A PREROUTING -m comment --comment \"nodekit service portals\" -j NODEKIT-SERVICES",
			"-A POSTROUTING -s 10.99.0.0/16 -j RETURN",
		} {
			if !strings.Contains(saved, want) {
				t.Errorf("iptables-save lacks %q:\n%s", want, saved)
			}
		}
		if res.Rules["nat"] == 0 || res.Rules["filter"] == 0 {
			t.Errorf("rule counts = %v", res.Rules)
		}

		// Partial: change only b's endpoint; a's chains must not be rewritten, b's old SEP deleted.
		b2 := port("b", "10.96.0.11", 53, v1.ProtocolUDP, "10.244.1.4")
		res, err = s.Sync(ctx, &state.Snapshot{Ports: []*state.ServicePort{a, b2, c}}, false)
		if err != nil {
			t.Fatal(err)
		}
		// b's new SEP and b's SVC chain, whose content changed; the top-level chains did not change.
		if res.ChainsWritten != 2 || res.ChainsDeleted != 1 {
			t.Errorf("partial sync wrote %d chains and deleted %d, want 2 and 1", res.ChainsWritten, res.ChainsDeleted)
		}
		saved = saveAll(t)
		if strings.Contains(saved, sepChain(b, b.Endpoints[0])) || !strings.Contains(saved, "--to-destination 10.244.1.4:8080") {
			t.Errorf("stale endpoint chain kept or new one missing:\n%s", saved)
		}

		// A new Syncer (a proxy restart) with a smaller state removes the leftovers on its first sync.
		s2, err := New(Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s2.Sync(ctx, &state.Snapshot{Ports: []*state.ServicePort{c}}, false); err != nil {
			t.Fatal(err)
		}
		saved = saveAll(t)
		if strings.Contains(saved, svcChain(a)) || strings.Contains(saved, "10.96.0.10") {
			t.Errorf("restart left stale rules of a:\n%s", saved)
		}

		if err := Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
		if after := saveAll(t); after != before {
			t.Errorf("after cleanup:\n%s\nwant:\n%s", after, before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
