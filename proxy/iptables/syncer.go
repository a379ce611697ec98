// Package iptables is the proxy's iptables backend: it turns a state.Snapshot into nat and filter chains of
// nodekit's own (NODEKIT-*) and writes them with one atomic `iptables-restore --noflush` batch per sync.
//
// Only nodekit's chains are ever declared in a batch, so rules of other owners are never touched, and a chain
// is replaced in the same transaction that declares it: there is no moment without rules, also across a
// proxy restart. After the first (full) sync, a sync rewrites only the top-level chains and the per-service
// chains whose rules changed, and deletes the chains no longer wanted.
package iptables

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"

	goiptables "github.com/coreos/go-iptables/iptables"

	"github.com/nodekit/nodekit/proxy/conntrack"
	"github.com/nodekit/nodekit/proxy/state"
)

// Result describes one sync.
type Result struct {
	// Rules is the number of rules nodekit owns after the sync, per table ("nat", "filter").
	Rules map[string]int
	// ChainsWritten and ChainsDeleted count the chains the batch declared and removed.
	ChainsWritten, ChainsDeleted int
	// ConntrackDeleted is the number of stale UDP conntrack entries removed.
	ConntrackDeleted uint
}

// Syncer programs nodekit's iptables rules. It is not safe for concurrent use; the proxy runner serialises
// syncs. All commands run in the network namespace of the calling OS thread.
type Syncer struct {
	cfg  Config
	ipt  *goiptables.IPTables
	log  *slog.Logger
	wait string // seconds iptables-restore waits for the xtables lock

	// applied is the content of each chain as last written successfully, per table; nil forces a full sync.
	applied map[string]map[string]string
	prev    *state.Snapshot
}

// New returns a Syncer. It fails when the iptables binaries are missing.
func New(cfg Config, log *slog.Logger) (*Syncer, error) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		return nil, fmt.Errorf("iptables mode: iptables-restore not found: %w", err)
	}
	ipt, err := goiptables.New(goiptables.Timeout(5))
	if err != nil {
		return nil, fmt.Errorf("iptables mode: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Syncer{cfg: cfg, ipt: ipt, log: log.With("mode", "iptables"), wait: "5"}, nil
}

// Sync writes the rules for snap and then deletes stale UDP conntrack entries. full rewrites every chain and
// also removes nodekit chains found in the kernel but not wanted (left by an earlier run); otherwise only
// changed chains are written. On error nothing of the batch is applied (iptables-restore is atomic per
// table) and the next Sync is full.
func (s *Syncer) Sync(ctx context.Context, snap *state.Snapshot, full bool) (Result, error) {
	res, err := s.Write(ctx, Build(snap, s.cfg), full)
	if err != nil {
		return res, err
	}
	n, err := conntrack.Delete(conntrack.Stale(s.prev, snap))
	res.ConntrackDeleted = n
	if err != nil {
		// The rules are in place; stale UDP flows expire by themselves. Report but keep the sync.
		s.log.Warn("conntrack cleanup failed", "err", err)
	}
	s.prev = snap
	return res, nil
}

// Write applies a Ruleset in one iptables-restore --noflush batch (see Sync for full) and makes sure the
// built-in chains jump to nodekit's. The IPVS backend uses it for the few iptables rules IPVS mode needs.
func (s *Syncer) Write(ctx context.Context, rs *Ruleset, full bool) (Result, error) {
	if s.applied == nil {
		full = true
	}
	existing := s.applied
	if full {
		var err error
		if existing, err = s.existingChains(ctx); err != nil {
			return Result{}, err
		}
		if s.cfg.LocalhostNodePorts {
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/all/route_localnet", []byte("1"), 0o644); err != nil {
				return Result{}, fmt.Errorf("localhost NodePorts need net.ipv4.conf.all.route_localnet=1: %w", err)
			}
		}
	}
	var buf bytes.Buffer
	res := Result{Rules: map[string]int{}}
	for _, tb := range []string{TableFilter, TableNAT} {
		w, d := writeTable(&buf, tb, rs.Tables[tb], existing[tb], full)
		res.ChainsWritten += w
		res.ChainsDeleted += d
		res.Rules[tb] = rs.Tables[tb].Rules()
	}
	if err := s.restore(ctx, &buf); err != nil {
		s.applied = nil
		return res, err
	}
	s.applied = map[string]map[string]string{}
	for tb, t := range rs.Tables {
		m := map[string]string{}
		for c, rules := range t.Chains {
			m[c] = strings.Join(rules, "\n")
		}
		s.applied[tb] = m
	}
	if full {
		if err := s.ensureJumps(); err != nil {
			s.applied = nil
			return res, err
		}
	}
	return res, nil
}

// writeTable appends one table's batch: declarations (which flush) of the chains to write, their rules, then
// the deletion of unwanted nodekit chains. prev maps chain → content last written (or "" when only known
// to exist). It returns the number of chains written and deleted.
func writeTable(buf *bytes.Buffer, table string, t *Table, prev map[string]string, full bool) (written, deleted int) {
	var write, del []string
	for _, c := range t.Order {
		old, had := prev[c]
		if full || !had || old != strings.Join(t.Chains[c], "\n") || isTop(table, c) {
			write = append(write, c)
		}
	}
	for c := range prev {
		if _, want := t.Chains[c]; !want {
			del = append(del, c)
		}
	}
	fmt.Fprintf(buf, "*%s\n", table)
	for _, c := range write {
		fmt.Fprintf(buf, ":%s - [0:0]\n", c)
	}
	for _, c := range del {
		fmt.Fprintf(buf, ":%s - [0:0]\n", c)
	}
	for _, c := range write {
		for _, r := range t.Chains[c] {
			buf.WriteString(r)
			buf.WriteByte('\n')
		}
	}
	for _, c := range del {
		fmt.Fprintf(buf, "-X %s\n", c)
	}
	buf.WriteString("COMMIT\n")
	return len(write), len(del)
}

func isTop(table, chain string) bool {
	for _, c := range topChains[table] {
		if c == chain {
			return true
		}
	}
	return false
}

func (s *Syncer) restore(ctx context.Context, in *bytes.Buffer) error {
	cmd := exec.CommandContext(ctx, "iptables-restore", "-w", s.wait, "--noflush")
	cmd.Stdin = bytes.NewReader(in.Bytes())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("iptables-restore --noflush (%d bytes): %w: %s", in.Len(), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// existingChains lists the nodekit chains present in the kernel's nat and filter tables.
func (s *Syncer) existingChains(ctx context.Context) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, tb := range []string{TableFilter, TableNAT} {
		chains, err := savedChains(ctx, tb)
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, c := range chains {
			m[c] = ""
		}
		out[tb] = m
	}
	return out, nil
}

// savedChains returns the nodekit chain names in iptables-save output of one table.
func savedChains(ctx context.Context, table string) ([]string, error) {
	lines, err := save(ctx, table)
	if err != nil {
		return nil, err
	}
	var chains []string
	for _, l := range lines {
		if strings.HasPrefix(l, ":"+ChainPrefix) {
			chains = append(chains, strings.Fields(l[1:])[0])
		}
	}
	return chains, nil
}

func save(ctx context.Context, table string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "iptables-save", "-t", table)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("iptables-save -t %s: %w: %s", table, err, strings.TrimSpace(stderr.String()))
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// ensureJumps inserts the entry rules into the built-in chains when missing (first in the chain, like
// kube-proxy), leaving existing rules of other owners alone.
func (s *Syncer) ensureJumps() error {
	for i := len(jumps) - 1; i >= 0; i-- {
		j := jumps[i]
		ok, err := s.ipt.Exists(j.table, j.chain, j.spec...)
		if err != nil {
			return fmt.Errorf("check %s %s jump to nodekit: %w", j.table, j.chain, err)
		}
		if !ok {
			if err := s.ipt.Insert(j.table, j.chain, 1, j.spec...); err != nil {
				return fmt.Errorf("insert %s %s jump to nodekit: %w", j.table, j.chain, err)
			}
		}
	}
	return nil
}

// Cleanup removes every rule and chain nodekit owns from the nat and filter tables of the current network
// namespace, in one batch: the jumps from built-in chains, then the NODEKIT-* chains. Rules of other owners
// stay as they were. It is idempotent.
func Cleanup(ctx context.Context) error {
	var buf bytes.Buffer
	for _, tb := range []string{TableFilter, TableNAT} {
		lines, err := save(ctx, tb)
		if err != nil {
			return err
		}
		var chains, dels []string
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, ":"+ChainPrefix):
				chains = append(chains, strings.Fields(l[1:])[0])
			case strings.HasPrefix(l, "-A ") && !strings.HasPrefix(l, "-A "+ChainPrefix) && strings.Contains(l, "-j "+ChainPrefix):
				dels = append(dels, "-D "+l[3:])
			}
		}
		fmt.Fprintf(&buf, "*%s\n", tb)
		for _, c := range chains {
			fmt.Fprintf(&buf, ":%s - [0:0]\n", c)
		}
		for _, d := range dels {
			buf.WriteString(d + "\n")
		}
		for _, c := range chains {
			fmt.Fprintf(&buf, "-X %s\n", c)
		}
		buf.WriteString("COMMIT\n")
	}
	cmd := exec.CommandContext(ctx, "iptables-restore", "-w", "5", "--noflush")
	cmd.Stdin = &buf
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables cleanup: iptables-restore: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
