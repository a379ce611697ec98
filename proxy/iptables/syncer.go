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
	"sort"
	"strings"

	goiptables "github.com/coreos/go-iptables/iptables"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/nodekit/nodekit/proxy/conntrack"
	"github.com/nodekit/nodekit/proxy/state"
)

// Result describes one sync.
type Result struct {
	// Rules is the number of rules nodekit owns after the sync, per table ("nat", "filter").
	Rules map[string]int
	// ChainsWritten and ChainsDeleted count the chains the sync declared and removed.
	ChainsWritten, ChainsDeleted int
	// Batches is the number of iptables-restore runs the sync took: 1 unless it touched more than
	// Config.BatchChains chains.
	Batches int
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
	nft  bool   // iptables is the nf_tables variant (iptables-nft), so chains can be listed over netlink

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
	version, err := exec.Command("iptables", "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("iptables mode: iptables --version: %w", err)
	}
	nft := strings.Contains(string(version), "nf_tables") // "iptables v1.8.9 (nf_tables)"
	return &Syncer{cfg: cfg, ipt: ipt, log: log.With("mode", "iptables"), wait: "5", nft: nft}, nil
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
	res := Result{Rules: map[string]int{}}
	var plans []tablePlan
	for _, tb := range []string{TableFilter, TableNAT} {
		p := planTable(tb, rs.Tables[tb], existing[tb], full)
		res.ChainsWritten += len(p.write)
		res.ChainsDeleted += len(p.del)
		res.Rules[tb] = rs.Tables[tb].Rules()
		plans = append(plans, p)
	}
	batches := splitBatches(plans, s.cfg.batchChains())
	res.Batches = len(batches)
	for _, b := range batches {
		if err := s.restore(ctx, b); err != nil {
			s.applied = nil
			return res, err
		}
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
		if err := s.ensureJumps(ctx); err != nil {
			s.applied = nil
			return res, err
		}
	}
	return res, nil
}

// tablePlan is what one sync changes in one table: the chains to declare and fill (write), in dependency
// order, and the nodekit chains to delete (del), in reverse dependency order.
type tablePlan struct {
	table      string
	t          *Table
	write, del []string
}

// planTable compares the wanted table t with prev (chain → content last written, or "" when only known to
// exist) and lists what to write and delete. A chain is written when full, new or changed. Unlike kube-proxy,
// which rewrites its top-level chains (one rule per Service) on every sync, an unchanged top-level chain is
// left alone too: the Syncer knows what it last wrote, and a full resync repairs changes made behind its back.
func planTable(table string, t *Table, prev map[string]string, full bool) tablePlan {
	p := tablePlan{table: table, t: t}
	for _, c := range t.Order {
		old, had := prev[c]
		if full || !had || old != strings.Join(t.Chains[c], "\n") {
			p.write = append(p.write, c)
		}
	}
	for c := range prev {
		if _, want := t.Chains[c]; !want {
			p.del = append(p.del, c)
		}
	}
	// A chain may only jump to chains that already exist, and may only be deleted once nothing jumps to it:
	// write endpoint chains before the service chains that pick them, those before the entry chains, and
	// delete in the opposite order. Within one rank the order does not matter; sort for reproducible batches.
	sort.SliceStable(p.write, func(i, j int) bool { return rank(p.write[i]) < rank(p.write[j]) })
	sort.Strings(p.del)
	sort.SliceStable(p.del, func(i, j int) bool { return rank(p.del[i]) > rank(p.del[j]) })
	return p
}

// rank orders chains by what they jump to, so that writing in ascending rank never jumps to a chain not yet
// written: NODEKIT-MARK-MASQ jumps nowhere; SEP- (endpoint) chains jump to it; SVC-/SVL- chains pick SEP-
// chains; EXT- chains go to SVC-/SVL-; NODEKIT-NODEPORTS to EXT-; the remaining top-level chains, which the
// built-in chains jump to, come last.
func rank(chain string) int {
	switch {
	case chain == ChainMarkMasq:
		return 0
	case strings.HasPrefix(chain, ChainPrefix+"SEP-"):
		return 1
	case strings.HasPrefix(chain, ChainPrefix+"SVC-"), strings.HasPrefix(chain, ChainPrefix+"SVL-"):
		return 2
	case strings.HasPrefix(chain, ChainPrefix+"EXT-"):
		return 3
	case chain == ChainNodePorts:
		return 4
	default:
		return 5
	}
}

// splitBatches turns the table plans into iptables-restore inputs, each touching at most max chains
// (max <= 0: everything in one batch). A sync normally fits in one batch and is one transaction. A larger
// one (a full sync of thousands of Services) is cut into consecutive batches in the plans' dependency
// order, so each batch is atomic and every state between two batches is consistent: new chains only jump
// to chains already written, old chains still find what they jump to, and stale chains go last. The cut
// exists because iptables-nft-restore's own (userspace) cost grows with the square of the chains declared
// in one input: 16,000 chains take 7.3 s in one run and 1.8 s in 32 runs of 500 (docs/proxy.md).
func splitBatches(plans []tablePlan, max int) []*bytes.Buffer {
	type op struct{ plan, i int }
	var ops []op
	for k, p := range plans {
		for i := 0; i < len(p.write)+len(p.del); i++ {
			ops = append(ops, op{k, i})
		}
	}
	if max <= 0 {
		max = len(ops)
	}
	var out []*bytes.Buffer
	for len(ops) > 0 {
		n := min(max, len(ops))
		batch := ops[:n]
		ops = ops[n:]
		buf := &bytes.Buffer{}
		// One table section per run of operations on the same table.
		for start := 0; start < len(batch); {
			end := start
			for end < len(batch) && batch[end].plan == batch[start].plan {
				end++
			}
			writeOps(buf, plans[batch[start].plan], batch[start].i, batch[end-1].i+1)
			start = end
		}
		out = append(out, buf)
	}
	return out
}

// writeOps appends one table section with operations [from, to) of p (writes, then deletions): declarations
// (which flush) of the chains to write and delete, the written chains' rules, then the deletions.
func writeOps(buf *bytes.Buffer, p tablePlan, from, to int) {
	var write, del []string
	for i := from; i < to; i++ {
		if i < len(p.write) {
			write = append(write, p.write[i])
		} else {
			del = append(del, p.del[i-len(p.write)])
		}
	}
	fmt.Fprintf(buf, "*%s\n", p.table)
	for _, c := range append(write, del...) {
		fmt.Fprintf(buf, ":%s - [0:0]\n", c)
	}
	for _, c := range write {
		for _, r := range p.t.Chains[c] {
			buf.WriteString(r)
			buf.WriteByte('\n')
		}
	}
	for _, c := range del {
		fmt.Fprintf(buf, "-X %s\n", c)
	}
	buf.WriteString("COMMIT\n")
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
		var chains []string
		var err error
		if s.nft {
			chains, err = nftChains(tb)
		} else {
			chains, err = savedChains(ctx, tb)
		}
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

// nftChains returns the nodekit chain names of an iptables-nft table (nf_tables table "ip <table>") from
// the kernel over netlink. Only names are needed, and iptables-save prints every rule at a cost that grows
// with the square of the chains: 80,000 chains take 24 s through iptables-save and 0.3 s this way.
func nftChains(table string) ([]string, error) {
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nf_tables netlink: %w", err)
	}
	all, err := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("list nf_tables chains of ip %s: %w", table, err)
	}
	var chains []string
	for _, c := range all {
		if c.Table != nil && c.Table.Name == table && strings.HasPrefix(c.Name, ChainPrefix) {
			chains = append(chains, c.Name)
		}
	}
	return chains, nil
}

// savedChains returns the nodekit chain names in iptables-save output of one table.
func savedChains(ctx context.Context, table string) ([]string, error) {
	lines, err := save(ctx, table)
	if err != nil {
		return nil, err
	}
	chains, _ := parseSave(lines)
	return chains, nil
}

// parseSave reads the lines of one table's iptables-save output: chains are the nodekit chain names
// declared (":NODEKIT-... - [0:0]"), foreign the rules of other chains that jump (-j or -g) to a nodekit
// chain, as "<chain> <args>" (the rule's -A line without "-A "). A comment or other argument merely
// containing "-j NODEKIT-" does not count: the target is read from the tokenised rule, iptables-save's
// double quotes respected.
func parseSave(lines []string) (chains, foreign []string) {
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, ":"+ChainPrefix):
			chains = append(chains, strings.Fields(l[1:])[0])
		case strings.HasPrefix(l, "-A ") && !strings.HasPrefix(l, "-A "+ChainPrefix) && jumpsToNodekit(l):
			foreign = append(foreign, l[3:])
		}
	}
	return chains, foreign
}

// jumpsToNodekit reports whether the iptables-save rule line targets a nodekit chain.
func jumpsToNodekit(rule string) bool {
	toks := saveTokens(rule)
	for i := 0; i+1 < len(toks); i++ {
		if (toks[i] == "-j" || toks[i] == "-g") && strings.HasPrefix(toks[i+1], ChainPrefix) {
			return true
		}
	}
	return false
}

// saveTokens splits an iptables-save line into its arguments: separated by spaces, a double-quoted
// argument (with backslash escapes, as iptables-save quotes comments) being one token, quotes removed.
func saveTokens(line string) []string {
	var toks []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			quoted, in = !quoted, true
		case c == ' ' && !quoted:
			if in {
				toks = append(toks, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		toks = append(toks, cur.String())
	}
	return toks
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
// kube-proxy), leaving existing rules of other owners alone. The missing ones are found with one netlink
// listing (iptables-nft) or `iptables -C` per rule (legacy), and inserted with one iptables-restore run.
func (s *Syncer) ensureJumps(ctx context.Context) error {
	present := s.presentJump
	if s.nft {
		var err error
		if present, err = nftJumps(); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	for _, tb := range []string{TableFilter, TableNAT} {
		var lines []string
		// Inserted at position 1 in reverse, so the rules end up in the order of jumps.
		for i := len(jumps) - 1; i >= 0; i-- {
			j := jumps[i]
			if j.table != tb {
				continue
			}
			ok, err := present(j)
			if err != nil {
				return fmt.Errorf("check %s %s jump to nodekit: %w", j.table, j.chain, err)
			}
			if !ok {
				lines = append(lines, "-I "+j.chain+" 1 "+restoreArgs(j.spec))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&buf, "*%s\n%s\nCOMMIT\n", tb, strings.Join(lines, "\n"))
		}
	}
	if buf.Len() == 0 {
		return nil
	}
	return s.restore(ctx, &buf)
}

// presentJump reports whether the entry rule j is in its built-in chain (`iptables -C`).
func (s *Syncer) presentJump(j jump) (bool, error) { return s.ipt.Exists(j.table, j.chain, j.spec...) }

// nftJumps lists, over nf_tables netlink, which entry rules' jumps are in the built-in chains of iptables-nft's
// "ip nat" and "ip filter" tables, and returns a lookup by (table, chain, target chain): each built-in chain
// has at most one jump of nodekit's to a given chain.
func nftJumps() (func(jump) (bool, error), error) {
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nf_tables netlink: %w", err)
	}
	type key struct{ table, chain, target string }
	have := map[key]bool{}
	listed := map[[2]string]bool{}
	for _, j := range jumps {
		if listed[[2]string{j.table, j.chain}] {
			continue
		}
		listed[[2]string{j.table, j.chain}] = true
		rules, err := conn.GetRules(&nftables.Table{Name: j.table, Family: nftables.TableFamilyIPv4}, &nftables.Chain{Name: j.chain})
		if err != nil {
			return nil, fmt.Errorf("list nf_tables rules of ip %s %s: %w", j.table, j.chain, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if v, ok := e.(*expr.Verdict); ok && v.Kind == expr.VerdictJump {
					have[key{j.table, j.chain, v.Chain}] = true
				}
			}
		}
	}
	return func(j jump) (bool, error) { return have[key{j.table, j.chain, j.spec[len(j.spec)-1]}], nil }, nil
}

// restoreArgs renders rule arguments as one iptables-restore line, double-quoting those with spaces,
// quotes or backslashes the way iptables-restore reads them back: a backslash escapes the next byte, and
// nothing else is an escape (Go's strconv.Quote would turn bytes it escapes, like "\x95", into other
// text). Arguments hold no newline (the line would end there).
func restoreArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t\"\\") {
			a = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(a) + `"`
		}
		out[i] = a
	}
	return strings.Join(out, " ")
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
		chains, foreign := parseSave(lines)
		fmt.Fprintf(&buf, "*%s\n", tb)
		for _, c := range chains {
			fmt.Fprintf(&buf, ":%s - [0:0]\n", c)
		}
		for _, r := range foreign {
			buf.WriteString("-D " + r + "\n")
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
