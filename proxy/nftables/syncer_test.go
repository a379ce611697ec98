package nftables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables/expr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/proxy/internal/testns"
	"github.com/nodekit/nodekit/proxy/state"
)

func port(name string, cip string, p int32, proto v1.Protocol, eps ...string) *state.ServicePort {
	sp := &state.ServicePort{
		Name:      state.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}, Port: "p", Protocol: proto},
		ClusterIP: netip.MustParseAddr(cip), Port: p, Protocol: proto,
	}
	for _, e := range eps {
		sp.Endpoints = append(sp.Endpoints, state.Endpoint{IP: netip.MustParseAddr(e), Port: 8080, Ready: true, Serving: true})
	}
	return sp
}

// nftList returns `nft list ruleset` of the current network namespace.
func nftList(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed (hack/install-deps.sh installs it): the test reads the kernel's table with it")
	}
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	return string(out)
}

// iptablesSave returns iptables-save without comments and counters.
func iptablesSave(t *testing.T) string {
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
		if i := strings.LastIndex(l, " ["); strings.HasPrefix(l, ":") && i > 0 {
			l = l[:i]
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func nft(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("nft", args...).CombinedOutput(); err != nil {
		t.Fatalf("nft %v: %v: %s", args, err, out)
	}
}

// TestSyncPartialRestartAndCleanup: a first sync programs the table; changing one Service's endpoint writes
// only that Service's chains; a new Syncer (a restart) with fewer Services removes the leftovers; Cleanup
// deletes the table and leaves another owner's nftables table and iptables rules as they were.
func TestSyncPartialRestartAndCleanup(t *testing.T) {
	node := testns.New(t)
	err := node.Do(func(ns.NetNS) error {
		ctx := context.Background()
		nftList(t) // skips without nft
		if out, err := exec.Command("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "10.99.0.0/16", "-j", "RETURN").CombinedOutput(); err != nil {
			t.Fatalf("seed rule: %v %s", err, out)
		}
		nft(t, "add", "table", "ip", "other")
		nft(t, "add", "chain", "ip", "other", "input", "{ type filter hook input priority 0; }")
		nft(t, "add", "rule", "ip", "other", "input", "ip saddr 10.98.0.0/16 accept")
		beforeIPT, beforeNFT := iptablesSave(t), nftList(t)

		s, err := New(Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := port("a", "10.96.0.10", 80, v1.ProtocolTCP, "10.244.1.1", "10.244.1.2")
		b := port("b", "10.96.0.11", 53, v1.ProtocolUDP, "10.244.1.3")
		b.NodePort = 30053
		c := port("c", "10.96.0.12", 80, v1.ProtocolTCP)
		c.AffinityTimeout = 30
		res, err := s.Sync(ctx, &state.Snapshot{Ports: []*state.ServicePort{a, b, c}}, false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Transactions != 1 {
			t.Errorf("first sync took %d transactions, want 1", res.Transactions)
		}
		listed := nftList(t)
		for _, want := range []string{
			"10.96.0.10 . tcp . 80 : goto " + ServiceChain(a),
			"10.96.0.12 . tcp . 80 : goto reject-chain",
			"udp . 30053 : goto " + ExternalChain(b),
			"numgen random mod 2 vmap",
			"ip daddr 10.96.0.10 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade",
			"meta l4proto udp dnat to 10.244.1.3:8080",
			"type nat hook prerouting priority dstnat; policy accept;",
			"masquerade fully-random",
			"ip saddr 10.98.0.0/16 accept",
		} {
			if !strings.Contains(listed, want) {
				t.Errorf("nft list ruleset lacks %q:\n%s", want, listed)
			}
		}

		// Partial: only b's endpoint changes. b's new endpoint chain and b's service chain are written, the
		// old endpoint chain deleted; no map element changes (b's ClusterIP still goes to its service chain).
		b2 := port("b", "10.96.0.11", 53, v1.ProtocolUDP, "10.244.1.4")
		b2.NodePort = 30053
		res, err = s.Sync(ctx, &state.Snapshot{Ports: []*state.ServicePort{a, b2, c}}, false)
		if err != nil {
			t.Fatal(err)
		}
		if res.ChainsWritten != 2 || res.ChainsDeleted != 1 || res.ElementsAdded+res.ElementsDeleted != 0 || res.Transactions != 1 {
			t.Errorf("partial sync: %+v, want 2 chains written, 1 deleted, no element, one transaction", res)
		}
		listed = nftList(t)
		if strings.Contains(listed, EndpointChain(b, b.Endpoints[0])) || !strings.Contains(listed, "dnat to 10.244.1.4:8080") {
			t.Errorf("stale endpoint chain kept or new one missing:\n%s", listed)
		}

		// A restart with c alone: the first (full) sync removes a's and b's chains and elements.
		s2, err := New(Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s2.Sync(ctx, &state.Snapshot{Ports: []*state.ServicePort{c}}, false); err != nil {
			t.Fatal(err)
		}
		listed = nftList(t)
		for _, stale := range []string{ServiceChain(a), "10.96.0.10", ExternalChain(b), "30053"} {
			if strings.Contains(listed, stale) {
				t.Errorf("restart left %q:\n%s", stale, listed)
			}
		}

		if err := Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
		if err := Cleanup(ctx); err != nil {
			t.Fatalf("second Cleanup: %v", err)
		}
		if after := nftList(t); after != beforeNFT {
			t.Errorf("after cleanup nft list ruleset:\n%s\nwant:\n%s", after, beforeNFT)
		}
		if after := iptablesSave(t); after != beforeIPT {
			t.Errorf("after cleanup iptables-save:\n%s\nwant:\n%s", after, beforeIPT)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSyncInBatches: a sync cut into many small transactions leaves the same table as one transaction; 250
// Services also need more than one netlink message per map (elementsPerMessage).
func TestSyncInBatches(t *testing.T) {
	var snap state.Snapshot
	for i := 0; i < 250; i++ {
		sp := port(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, v1.ProtocolTCP, "10.244.1.1", "10.244.1.2", "10.244.1.3")
		sp.NodePort = int32(30000 + i)
		snap.Ports = append(snap.Ports, sp)
	}
	var listings []string
	for _, max := range []int{0, 40} {
		node := testns.New(t)
		err := node.Do(func(ns.NetNS) error {
			s, err := New(Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}, nil)
			if err != nil {
				return err
			}
			s.BatchMessages = max
			res, err := s.Sync(context.Background(), &snap, true)
			if err != nil {
				return err
			}
			t.Logf("batch cap %d: %d messages in %d transactions", max, res.Messages, res.Transactions)
			if max == 40 && res.Transactions < res.Messages/40 {
				t.Errorf("cap 40: %d transactions for %d messages", res.Transactions, res.Messages)
			}
			if res.Rules["elements"] != 500 {
				t.Errorf("%d map elements, want 500 (250 ClusterIPs, 250 NodePorts)", res.Rules["elements"])
			}
			listings = append(listings, nftList(t))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if listings[0] != listings[1] {
		t.Errorf("batched sync differs from one transaction:\n%s\nvs\n%s", listings[1], listings[0])
	}
}

// TestFailedTransactionNamesRequest: a batch the kernel refuses (a rule in a chain that does not exist) is
// not applied, and the error names the refused request and the kernel's errno, although only the last
// request of the batch asks for an acknowledgement.
func TestFailedTransactionNamesRequest(t *testing.T) {
	node := testns.New(t)
	err := node.Do(func(ns.NetNS) error {
		s, err := New(Config{}, nil)
		if err != nil {
			return err
		}
		bad := op{kind: opAddRule, name: "no-such-chain", rule: newRule().verdict(expr.VerdictAccept, "").done()}
		units := []unit{{{kind: opAddTable}}, {{kind: opAddChain, name: "ok-chain", chain: &Chain{}}}, {bad},
			{{kind: opAddChain, name: "after", chain: &Chain{}}}}
		_, err = s.apply(context.Background(), units)
		if err == nil || !strings.Contains(err.Error(), bad.String()) || !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("apply: %v; want ENOENT naming %q", err, bad.String())
		}
		if out := nftList(t); strings.Contains(out, TableName) {
			t.Errorf("a refused transaction left the table behind:\n%s", out)
		}
		// The same socket path works for a good batch, acknowledged once.
		if _, err := s.apply(context.Background(), units[:2]); err != nil {
			t.Fatalf("good batch: %v", err)
		}
		if out := nftList(t); !strings.Contains(out, "chain ok-chain") {
			t.Errorf("good batch not applied:\n%s", out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSharedKeyPassesToTheNextClaimant: two Services claim the same service-ips key (one's external IP is
// the other's ClusterIP); the first keeps it, and when it goes away a partial sync hands the key to the
// second instead of deleting it.
func TestSharedKeyPassesToTheNextClaimant(t *testing.T) {
	node := testns.New(t)
	err := node.Do(func(ns.NetNS) error {
		a := port("a", "10.96.0.1", 80, v1.ProtocolTCP, "10.244.1.1")
		b := port("b", "10.96.0.2", 80, v1.ProtocolTCP, "10.244.2.1")
		b.ExternalIPs = []netip.Addr{netip.MustParseAddr("10.96.0.1")}
		s, err := New(Config{}, nil)
		if err != nil {
			return err
		}
		if _, err := s.Sync(context.Background(), &state.Snapshot{Ports: []*state.ServicePort{a, b}}, false); err != nil {
			return err
		}
		if out := nftList(t); !strings.Contains(out, "10.96.0.1 . tcp . 80 : goto "+ServiceChain(a)) {
			t.Errorf("first claimant a does not own 10.96.0.1:80:\n%s", out)
		}
		res, err := s.Sync(context.Background(), &state.Snapshot{Ports: []*state.ServicePort{b}}, false)
		if err != nil {
			return err
		}
		out := nftList(t)
		if !strings.Contains(out, "10.96.0.1 . tcp . 80 : goto "+ExternalChain(b)) {
			t.Errorf("after a's removal, 10.96.0.1:80 does not go to b's external chain:\n%s", out)
		}
		if res.Rules["elements"] != 2 {
			t.Errorf("%d elements reported; want 2 (b's ClusterIP and external IP)", res.Rules["elements"])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
