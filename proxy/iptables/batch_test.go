package iptables

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/proxy/internal/testns"
	"github.com/nodekit/nodekit/proxy/state"
)

// manyPorts returns n Service ports of every kind the rules have chains for: Cluster and Local policies,
// NodePorts and external IPs, session affinity, and endpoints shifted by gen.
func manyPorts(n, gen int) *state.Snapshot {
	snap := &state.Snapshot{}
	for i := 0; i < n; i++ {
		sp := port(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), 80, v1.ProtocolTCP,
			fmt.Sprintf("10.244.1.%d", i+1+gen), fmt.Sprintf("10.244.2.%d", i+1+gen))
		switch i % 4 {
		case 1:
			sp.NodePort = int32(30000 + i)
			sp.ExternalLocal = true
			sp.Endpoints[0].Local = true
		case 2:
			sp.ExternalIPs = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", i+1))}
			sp.AffinityTimeout = 60
		case 3:
			sp.InternalLocal = true
			sp.Endpoints[1].Local = true
		}
		snap.Ports = append(snap.Ports, sp)
	}
	return snap
}

// kernelModel applies iptables-restore --noflush input the way the kernel does for nodekit's chains, and
// fails the test when a batch leaves a jump to a missing chain or deletes a chain still jumped to — the
// state the kernel would refuse, or traffic would meet between two batches.
type kernelModel map[string]map[string][]string // table → chain → rules

func (k kernelModel) apply(t *testing.T, batch string) {
	t.Helper()
	var table string
	sc := bufio.NewScanner(strings.NewReader(batch))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
			if k[table] == nil {
				k[table] = map[string][]string{}
			}
		case strings.HasPrefix(l, ":"):
			k[table][strings.Fields(l[1:])[0]] = nil
		case strings.HasPrefix(l, "-A "):
			c := strings.Fields(l)[1]
			k[table][c] = append(k[table][c], l)
		case strings.HasPrefix(l, "-X "):
			delete(k[table], l[3:])
		case l == "COMMIT":
			k.check(t, table)
		}
	}
}

func (k kernelModel) check(t *testing.T, table string) {
	t.Helper()
	for c, rules := range k[table] {
		for _, r := range rules {
			f := strings.Fields(r)
			for i := range f {
				if f[i] == "-j" && i+1 < len(f) && strings.HasPrefix(f[i+1], ChainPrefix) {
					if _, ok := k[table][f[i+1]]; !ok {
						t.Fatalf("after a batch, %s %s jumps to missing chain %s", table, c, f[i+1])
					}
				}
			}
		}
	}
}

func TestSplitBatchesKeepsEveryStepConsistent(t *testing.T) {
	cfg := Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	k := kernelModel{}
	var prev map[string]map[string]string
	for step, snap := range []*state.Snapshot{manyPorts(40, 0), manyPorts(40, 1), manyPorts(9, 2), manyPorts(0, 0)} {
		rs := Build(snap, cfg)
		var plans []tablePlan
		wantOps := 0
		for _, tb := range []string{TableFilter, TableNAT} {
			p := planTable(tb, rs.Tables[tb], prev[tb], prev == nil)
			wantOps += len(p.write) + len(p.del)
			plans = append(plans, p)
		}
		batches := splitBatches(plans, 7)
		if want := (wantOps + 6) / 7; len(batches) != want {
			t.Fatalf("step %d: %d operations in %d batches, want %d", step, wantOps, len(batches), want)
		}
		for _, b := range batches {
			if n := strings.Count(b.String(), "\n:"); n > 7 {
				t.Fatalf("step %d: a batch declares %d chains, cap 7", step, n)
			}
			k.apply(t, b.String())
		}
		// After the last batch the model holds exactly the wanted chains and rules.
		prev = map[string]map[string]string{}
		for tb, tab := range rs.Tables {
			prev[tb] = map[string]string{}
			if len(k[tb]) != len(tab.Chains) {
				t.Errorf("step %d: %s has %d chains, want %d", step, tb, len(k[tb]), len(tab.Chains))
			}
			for c, rules := range tab.Chains {
				if got := strings.Join(k[tb][c], "\n"); got != strings.Join(rules, "\n") {
					t.Errorf("step %d: %s %s = %q, want %q", step, tb, c, got, strings.Join(rules, "\n"))
				}
				prev[tb][c] = strings.Join(rules, "\n")
			}
		}
	}
}

func TestSplitBatchesUncappedIsOneTransaction(t *testing.T) {
	rs := Build(manyPorts(40, 0), Config{})
	plans := []tablePlan{planTable(TableFilter, rs.Tables[TableFilter], nil, true), planTable(TableNAT, rs.Tables[TableNAT], nil, true)}
	if got := len(splitBatches(plans, 0)); got != 1 {
		t.Errorf("uncapped: %d batches, want 1", got)
	}
	if got := len(splitBatches(plans, 100000)); got != 1 {
		t.Errorf("cap above the chain count: %d batches, want 1", got)
	}
}

// TestSyncInBatches writes a ruleset in many small batches into a real nat table and checks that the kernel
// ends up with exactly what one batch writes, across a change and a shrink.
func TestSyncInBatches(t *testing.T) {
	node := testns.New(t)
	err := node.Do(func(ns.NetNS) error {
		ctx := context.Background()
		cfg := Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
		one, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, snap := range []*state.Snapshot{manyPorts(30, 0), manyPorts(30, 1), manyPorts(5, 2)} {
			if _, err := one.Sync(ctx, snap, true); err != nil {
				t.Fatal(err)
			}
			want = append(want, saveAll(t))
		}
		if err := Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
		cfg.BatchChains = 10
		many, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, snap := range []*state.Snapshot{manyPorts(30, 0), manyPorts(30, 1), manyPorts(5, 2)} {
			res, err := many.Sync(ctx, snap, false)
			if err != nil {
				t.Fatal(err)
			}
			if res.Batches < 2 {
				t.Errorf("sync %d: %d batches for %d chains written and %d deleted with a cap of 10", i, res.Batches, res.ChainsWritten, res.ChainsDeleted)
			}
			if got := saveAll(t); got != want[i] {
				t.Errorf("sync %d in batches differs from one batch:\n%s\nwant:\n%s", i, got, want[i])
			}
		}
		return Cleanup(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
}
