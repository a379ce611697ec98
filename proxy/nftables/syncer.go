// Package nftables is the proxy's nftables backend: it turns a state.Snapshot into one nf_tables table of
// nodekit's own ("ip nodekit-proxy") and writes it over netlink (github.com/google/nftables), with no
// process forked per sync.
//
// The design is kube-proxy's nftables mode: verdict maps keyed by ClusterIP . protocol . port (and NodePort,
// external IPs) send packets to per-service chains, which pick a per-endpoint chain with numgen; so a change
// to one Service rewrites only that Service's chains and map elements, whatever the number of Services. A
// sync is one nf_tables transaction unless it carries more than Config.BatchMessages netlink messages (a
// full sync of thousands of Services), which is cut in dependency order so that every state between two
// transactions is consistent, as the iptables backend's batches.
package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/proxy/conntrack"
	"github.com/nodekit/nodekit/proxy/state"
)

// DefaultBatchMessages is the default cap of netlink messages in one transaction. The kernel's work per
// message grows with the transaction's length (a rule finds the anonymous numgen map created with it by
// walking the transaction's list), while nf_tables validates the whole table once per transaction that adds
// a jump or goto. At 10,000 Services × 3 endpoints (130,000 messages) one transaction took 108 s of CPU,
// cuts of 16,000 messages 20 s, so big syncs are cut. Only the last message of a transaction asks for an
// acknowledgement, so the cap is not about receive buffers; the send buffer is sized to each batch.
const DefaultBatchMessages = 16000

// Result describes one sync.
type Result struct {
	// Rules counts what nodekit's table holds after the sync: "chains", "rules", "elements".
	Rules map[string]int
	// ChainsWritten and ChainsDeleted count the chains the sync (re)filled and removed; ElementsAdded and
	// ElementsDeleted the verdict-map elements.
	ChainsWritten, ChainsDeleted, ElementsAdded, ElementsDeleted int
	// Messages is the number of netlink messages sent, Transactions the number of nf_tables transactions.
	Messages, Transactions int
	// ConntrackDeleted is the number of stale UDP conntrack entries removed.
	ConntrackDeleted uint
}

// Syncer programs nodekit's nftables table. It is not safe for concurrent use; the proxy runner serialises
// syncs. All netlink sockets are opened in the network namespace of the calling OS thread.
//
// It keeps, per service port, the rules it last wrote (BuildPort's result) and the ServicePort they were
// built from: a sync rebuilds only the ports whose ServicePort is not the same pointer as last time
// (state.Cache keeps unchanged ports' pointers) and compares only those, so the cost of a partial sync
// follows the number of changed Services, not of all Services.
type Syncer struct {
	cfg Config
	log *slog.Logger
	// BatchMessages caps the netlink messages of one transaction (0: DefaultBatchMessages).
	BatchMessages int

	fixed *Ruleset // the chains every table has (NewRuleset)
	// synced is false before the first successful sync and after a failure: the next sync is full.
	synced bool
	ports  map[state.ServicePortName]*portRules
	// claims lists, per map element ("map\x00key"), the ports that want it, in claim order; the kernel
	// holds the first one's element (written).
	claims  map[string][]state.ServicePortName
	written map[string]map[string]Element
	prev    *state.Snapshot
}

// portRules is what one service port contributes to the table.
type portRules struct {
	sp    *state.ServicePort
	rs    *Ruleset
	rules int
}

func newPortRules(sp *state.ServicePort, cfg Config) *portRules {
	pr := &portRules{sp: sp, rs: BuildPort(sp, cfg)}
	for _, c := range pr.rs.Chains {
		pr.rules += len(c.Rules)
	}
	return pr
}

// New returns a Syncer. It fails when the kernel has no nf_tables (the netlink family cannot be reached).
func New(cfg Config, log *slog.Logger) (*Syncer, error) {
	if log == nil {
		log = slog.Default()
	}
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables mode: %w", err)
	}
	if _, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
		return nil, fmt.Errorf("nftables mode: nf_tables netlink unavailable (kernel without nf_tables?); use --proxy-mode iptables: %w", err)
	}
	return &Syncer{cfg: cfg, log: log.With("mode", "nftables"), fixed: NewRuleset(cfg)}, nil
}

func claimKey(m, k string) string { return m + "\x00" + k }

// emptyRuleset has the table's maps, with no element, and nothing else.
func emptyRuleset() *Ruleset {
	rs := &Ruleset{Chains: map[string]*Chain{}, Maps: map[string]map[string]Element{}, Affinity: map[string]time.Duration{}}
	for m := range mapKeys {
		rs.Maps[m] = map[string]Element{}
	}
	return rs
}

// Sync writes the table for snap and then deletes stale UDP conntrack entries. full rewrites every chain and
// map and deletes chains and sets found in the table but not wanted (left by an earlier run); otherwise only
// the chains and elements of the ports that changed since the last sync are written. On error the failed
// transaction is not applied (nf_tables transactions are atomic) and the next Sync is full.
func (s *Syncer) Sync(ctx context.Context, snap *state.Snapshot, full bool) (Result, error) {
	if !s.synced {
		full = true
	}
	next := make(map[state.ServicePortName]*portRules, len(snap.Ports))
	var changed []state.ServicePortName
	for _, sp := range snap.Ports {
		if old := s.ports[sp.Name]; old != nil && old.sp == sp {
			next[sp.Name] = old
			continue
		}
		next[sp.Name] = newPortRules(sp, s.cfg)
		changed = append(changed, sp.Name)
	}
	var units []unit
	if full {
		if s.cfg.LocalhostNodePorts {
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/all/route_localnet", []byte("1"), 0o644); err != nil {
				return Result{}, fmt.Errorf("localhost NodePorts need net.ipv4.conf.all.route_localnet=1: %w", err)
			}
		}
		have, err := listTable()
		if err != nil {
			return Result{}, err
		}
		want := s.resolveAll(snap, next)
		units = planFull(want, have)
	} else {
		units = planPartial(s.delta(changed, next))
	}
	s.ports = next
	res := summarize(units)
	res.Rules = s.counts()
	n, err := s.apply(ctx, units)
	res.Transactions = n
	if err != nil {
		s.synced = false
		return res, err
	}
	s.synced = true
	d, err := conntrack.Delete(conntrack.Stale(s.prev, snap))
	res.ConntrackDeleted = d
	if err != nil {
		// The rules are in place; stale UDP flows expire by themselves. Report but keep the sync.
		s.log.Warn("conntrack cleanup failed", "err", err)
	}
	s.prev = snap
	return res, nil
}

// resolveAll sets the claims and written elements from scratch, in snapshot order (the first port claiming
// a key keeps it), and returns the whole table.
func (s *Syncer) resolveAll(snap *state.Snapshot, next map[state.ServicePortName]*portRules) *Ruleset {
	want := NewRuleset(s.cfg)
	s.claims = map[string][]state.ServicePortName{}
	for _, sp := range snap.Ports {
		pr := next[sp.Name]
		for n, c := range pr.rs.Chains {
			want.Chains[n] = c
		}
		for n, t := range pr.rs.Affinity {
			want.Affinity[n] = t
		}
		for m, els := range pr.rs.Maps {
			for k, e := range els {
				ck := claimKey(m, k)
				if s.claims[ck] = append(s.claims[ck], sp.Name); len(s.claims[ck]) == 1 {
					want.Maps[m][k] = e
				}
			}
		}
	}
	s.written = want.Maps
	return want
}

// delta returns the old and new content of what the changed and removed ports touch: their chains and sets,
// and the map elements whose claims they change (as the kernel holds them, and as they will be). It updates
// the claims and written elements.
func (s *Syncer) delta(changed []state.ServicePortName, next map[state.ServicePortName]*portRules) (old, want *Ruleset) {
	old, want = emptyRuleset(), emptyRuleset()
	affected := map[string][2]string{}
	release := func(name state.ServicePortName, pr *portRules) {
		old.merge(&Ruleset{Chains: pr.rs.Chains, Affinity: pr.rs.Affinity})
		for m, els := range pr.rs.Maps {
			for k := range els {
				ck := claimKey(m, k)
				s.claims[ck] = slices.DeleteFunc(s.claims[ck], func(n state.ServicePortName) bool { return n == name })
				affected[ck] = [2]string{m, k}
			}
		}
	}
	for name, pr := range s.ports {
		if _, still := next[name]; !still {
			release(name, pr)
		}
	}
	for _, name := range changed {
		if pr := s.ports[name]; pr != nil {
			release(name, pr)
		}
		pr := next[name]
		want.merge(&Ruleset{Chains: pr.rs.Chains, Affinity: pr.rs.Affinity})
		for m, els := range pr.rs.Maps {
			for k := range els {
				ck := claimKey(m, k)
				s.claims[ck] = append(s.claims[ck], name)
				affected[ck] = [2]string{m, k}
			}
		}
	}
	for ck, mk := range affected {
		m, k := mk[0], mk[1]
		if e, ok := s.written[m][k]; ok {
			old.Maps[m][k] = e
		}
		owners := s.claims[ck]
		if len(owners) == 0 {
			delete(s.claims, ck)
			delete(s.written[m], k)
			continue
		}
		e := next[owners[0]].rs.Maps[m][k]
		want.Maps[m][k] = e
		s.written[m][k] = e
	}
	return old, want
}

// counts returns the table's chains, rules and map elements.
func (s *Syncer) counts() map[string]int {
	chains, rules, elements := len(s.fixed.Chains), 0, 0
	for _, c := range s.fixed.Chains {
		rules += len(c.Rules)
	}
	for _, pr := range s.ports {
		chains += len(pr.rs.Chains)
		rules += pr.rules
	}
	for _, els := range s.written {
		elements += len(els)
	}
	return map[string]int{"chains": chains, "rules": rules, "elements": elements}
}

// opKind is one kind of netlink request.
type opKind int

const (
	opAddTable opKind = iota
	opAddMap          // declare a verdict map (a no-op when it exists)
	opAddSet          // declare an affinity set (a no-op when it exists; elements are kept)
	opAddChain        // declare a chain (a no-op when it exists)
	opFlushChain
	opAddRule
	opFlushMap
	opAddElements
	opDelElements
	opDelChain
	opDelSet
)

// op is one netlink request of a transaction (an anonymous vmap with its rule counts as one op of two
// messages).
type op struct {
	kind    opKind
	name    string // table, map, set or chain
	chain   *Chain // opAddChain: the base chain hook, if any
	rule    Rule
	elems   []Element
	timeout time.Duration
}

// String renders the op in nft syntax, as `nft -f` would read it.
func (o op) String() string {
	switch o.kind {
	case opAddTable:
		return "add table ip " + TableName
	case opAddMap:
		return "add map ip " + TableName + " " + o.name
	case opAddSet:
		return fmt.Sprintf("add set ip %s %s { type ipv4_addr; flags dynamic,timeout; timeout %s; }", TableName, o.name, o.timeout)
	case opAddChain:
		return "add chain ip " + TableName + " " + o.name
	case opFlushChain:
		return "flush chain ip " + TableName + " " + o.name
	case opAddRule:
		return "add rule ip " + TableName + " " + o.name + " " + o.rule.Text
	case opFlushMap:
		return "flush map ip " + TableName + " " + o.name
	case opAddElements, opDelElements:
		verb := "add"
		if o.kind == opDelElements {
			verb = "delete"
		}
		var txt []string
		for _, e := range o.elems {
			txt = append(txt, e.Text)
		}
		return fmt.Sprintf("%s element ip %s %s { %s }", verb, TableName, o.name, strings.Join(txt, ", "))
	case opDelChain:
		return "delete chain ip " + TableName + " " + o.name
	case opDelSet:
		return "delete set ip " + TableName + " " + o.name
	}
	return fmt.Sprintf("op %d", o.kind)
}

func (o op) messages() int {
	switch {
	case o.kind == opAddRule && len(o.rule.vmap) > 0:
		return 3 // the anonymous map, its elements, the rule
	case o.kind == opAddElements || o.kind == opDelElements:
		return (len(o.elems) + elementsPerMessage - 1) / elementsPerMessage
	}
	return 1
}

// unit is a group of ops that must be in the same transaction (a chain's flush and its new rules; a map's
// flush and its elements).
type unit []op

// tableState is what the kernel's table holds: chain and named set names.
type tableState struct {
	exists       bool
	chains, sets map[string]bool
}

func ipTable() *nftables.Table {
	return &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
}

// listTable lists the chains and sets of nodekit's table over netlink.
func listTable() (tableState, error) {
	st := tableState{chains: map[string]bool{}, sets: map[string]bool{}}
	conn, err := nftables.New()
	if err != nil {
		return st, fmt.Errorf("nf_tables netlink: %w", err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return st, fmt.Errorf("list nf_tables tables: %w", err)
	}
	for _, t := range tables {
		st.exists = st.exists || t.Name == TableName
	}
	if !st.exists {
		return st, nil
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return st, fmt.Errorf("list chains of ip %s: %w", TableName, err)
	}
	for _, c := range chains {
		if c.Table != nil && c.Table.Name == TableName {
			st.chains[c.Name] = true
		}
	}
	sets, err := conn.GetSets(ipTable())
	if err != nil {
		return st, fmt.Errorf("list sets of ip %s: %w", TableName, err)
	}
	for _, s := range sets {
		if !s.Anonymous && !strings.HasPrefix(s.Name, "__") {
			st.sets[s.Name] = true
		}
	}
	return st, nil
}

// chainRank orders chains by what they jump to, so that filling chains in ascending rank never sends
// packets to a chain not yet filled when a sync spans several transactions: endpoint- chains jump only to
// mark-for-masquerade; service-/local- chains pick endpoint- chains; external- chains go to those; the
// fixed chains (maps' users, base chains) come last.
func chainRank(name string) int {
	switch {
	case name == chainMarkForMasq || name == chainReject || name == chainMasquerading:
		return 0
	case strings.HasPrefix(name, "endpoint-"):
		return 1
	case strings.HasPrefix(name, "service-"), strings.HasPrefix(name, "local-"):
		return 2
	case strings.HasPrefix(name, "external-"):
		return 3
	}
	return 4
}

func sortedChains(names []string) []string {
	sort.Strings(names)
	sort.SliceStable(names, func(i, j int) bool { return chainRank(names[i]) < chainRank(names[j]) })
	return names
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fill(name string, c *Chain, flush bool) unit {
	u := unit{}
	if flush {
		u = append(u, op{kind: opFlushChain, name: name})
	}
	for _, r := range c.Rules {
		u = append(u, op{kind: opAddRule, name: name, rule: r})
	}
	return u
}

// planFull writes everything: the table, maps, sets and chains are declared, every chain is flushed and
// refilled and every map flushed and refilled (each in one transaction with its flush), then what the
// kernel has but want lacks is deleted. Affinity sets are declared, not flushed, so clients stay on their
// endpoint across a restart.
func planFull(want *Ruleset, have tableState) []unit {
	var units []unit
	decl := unit{{kind: opAddTable, name: TableName}}
	for _, m := range keys(want.Maps) {
		decl = append(decl, op{kind: opAddMap, name: m})
	}
	for _, s := range keys(want.Affinity) {
		decl = append(decl, op{kind: opAddSet, name: s, timeout: want.Affinity[s]})
	}
	units = append(units, decl)
	names := sortedChains(keys(want.Chains))
	for _, c := range names {
		units = append(units, unit{{kind: opAddChain, name: c, chain: want.Chains[c]}})
	}
	for _, c := range names {
		units = append(units, fill(c, want.Chains[c], have.chains[c]))
	}
	for _, m := range keys(want.Maps) {
		u := unit{{kind: opFlushMap, name: m}}
		if els := elements(want.Maps[m], keys(want.Maps[m])); len(els) > 0 {
			u = append(u, op{kind: opAddElements, name: m, elems: els})
		}
		units = append(units, u)
	}
	var stale []string
	for c := range have.chains {
		if _, ok := want.Chains[c]; !ok {
			stale = append(stale, c)
		}
	}
	units = append(units, deletions(stale, have.sets, want)...)
	return units
}

// deletions deletes chains (highest rank first: nothing wanted jumps to them any more) and then the sets
// in sets that want lacks.
func deletions(chains []string, sets map[string]bool, want *Ruleset) []unit {
	var units []unit
	chains = sortedChains(chains)
	for i := len(chains) - 1; i >= 0; i-- {
		units = append(units, unit{{kind: opDelChain, name: chains[i]}})
	}
	for _, s := range keys(sets) {
		_, isMap := want.Maps[s]
		if _, ok := want.Affinity[s]; !ok && !isMap {
			units = append(units, unit{{kind: opDelSet, name: s}})
		}
	}
	return units
}

func elements(m map[string]Element, ks []string) []Element {
	out := make([]Element, 0, len(ks))
	for _, k := range ks {
		out = append(out, m[k])
	}
	return out
}

// planPartial writes only what differs between old (as last written) and want: new sets and chains are
// declared, new and changed chains (re)filled, map elements removed or changed deleted and new or changed
// ones added, then chains and sets no longer wanted deleted.
func planPartial(old, want *Ruleset) []unit {
	var units []unit
	decl := unit{}
	for _, s := range keys(want.Affinity) {
		if _, ok := old.Affinity[s]; !ok {
			decl = append(decl, op{kind: opAddSet, name: s, timeout: want.Affinity[s]})
		}
	}
	if len(decl) > 0 {
		units = append(units, decl)
	}
	names := sortedChains(keys(want.Chains))
	for _, c := range names {
		if _, ok := old.Chains[c]; !ok {
			units = append(units, unit{{kind: opAddChain, name: c, chain: want.Chains[c]}})
		}
	}
	for _, c := range names {
		prev, had := old.Chains[c]
		if !had || prev.content() != want.Chains[c].content() {
			units = append(units, fill(c, want.Chains[c], had))
		}
	}
	for _, m := range keys(want.Maps) {
		var del, add []string
		for k, e := range old.Maps[m] {
			if n, ok := want.Maps[m][k]; !ok || n.Text != e.Text {
				del = append(del, k)
			}
		}
		for k, e := range want.Maps[m] {
			if o, ok := old.Maps[m][k]; !ok || o.Text != e.Text {
				add = append(add, k)
			}
		}
		sort.Strings(del)
		sort.Strings(add)
		u := unit{}
		if len(del) > 0 {
			u = append(u, op{kind: opDelElements, name: m, elems: elements(old.Maps[m], del)})
		}
		if len(add) > 0 {
			u = append(u, op{kind: opAddElements, name: m, elems: elements(want.Maps[m], add)})
		}
		if len(u) > 0 {
			units = append(units, u)
		}
	}
	var stale []string
	for c := range old.Chains {
		if _, ok := want.Chains[c]; !ok {
			stale = append(stale, c)
		}
	}
	oldSets := map[string]bool{}
	for s := range old.Affinity {
		oldSets[s] = true
	}
	return append(units, deletions(stale, oldSets, want)...)
}

func summarize(units []unit) Result {
	var r Result
	for _, u := range units {
		for _, o := range u {
			r.Messages += o.messages()
			switch o.kind {
			case opAddElements:
				r.ElementsAdded += len(o.elems)
			case opDelElements:
				r.ElementsDeleted += len(o.elems)
			case opDelChain:
				r.ChainsDeleted++
			}
		}
		if len(u) > 0 && (u[0].kind == opFlushChain || u[0].kind == opAddRule) {
			r.ChainsWritten++
		}
	}
	return r
}

// batches cuts units into transactions of at most max messages (a unit larger than max is one transaction
// of its own).
func batches(units []unit, max int) [][]op {
	var out [][]op
	var cur []op
	n := 0
	for _, u := range units {
		m := 0
		for _, o := range u {
			m += o.messages()
		}
		if n > 0 && n+m > max {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, u...)
		n += m
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// apply sends the units as transactions and returns how many were committed.
func (s *Syncer) apply(ctx context.Context, units []unit) (int, error) {
	max := s.BatchMessages
	if max <= 0 {
		max = DefaultBatchMessages
	}
	bs := batches(units, max)
	if len(bs) == 0 {
		return 0, nil
	}
	sock, err := openNetlink()
	if err != nil {
		return 0, err
	}
	defer unix.Close(sock)
	done := 0
	for _, b := range bs {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		msgs, err := serialize(b)
		if err != nil {
			return done, err
		}
		if err := transact(sock, msgs); err != nil {
			var me *messageError
			if errors.As(err, &me) {
				err = fmt.Errorf("%w (request %q)", err, opOfMessage(b, me.index))
			}
			return done, fmt.Errorf("nftables transaction %d (%d requests, first %q): %w", done+1, len(b), b[0].String(), err)
		}
		done++
	}
	return done, nil
}

// serialize returns the netlink messages of one transaction, batch begin and end included, as
// google/nftables encodes them. The Conn is dialled to a stand-in that records the batch and acknowledges
// everything, because google/nftables asks the kernel for an acknowledgement (and, for rules, an echo) of
// every message and reads them one receive at a time: 130,000 round trips through the Go netpoller for a
// 10,000-Service table. transact sends the batch with a single acknowledgement instead.
func serialize(ops []op) ([]netlink.Message, error) {
	var batch []netlink.Message
	ack := []netlink.Message{{Header: netlink.Header{Type: netlink.Error}, Data: make([]byte, 4)}}
	conn, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		batch = append(batch, req...)
		return ack, nil
	}))
	if err != nil {
		return nil, err
	}
	if err := queue(conn, ops); err != nil {
		return nil, err
	}
	if err := conn.Flush(); err != nil {
		return nil, fmt.Errorf("nftables: encode transaction: %w", err)
	}
	return batch, nil
}

// opOfMessage names the op that produced message i (0 is the batch begin) of a transaction of ops.
func opOfMessage(ops []op, i int) string {
	n := 1
	for _, o := range ops {
		if n += o.messages(); i < n {
			return o.String()
		}
	}
	return fmt.Sprintf("message %d", i)
}

// openNetlink opens an nfnetlink socket in the calling thread's network namespace, with buffers for big
// transactions: the whole batch is one sendmsg.
func openNetlink() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return -1, fmt.Errorf("nf_tables netlink socket: %w", err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("nf_tables netlink socket: %s: %w", what, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail("bind", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20); err != nil {
		return fail("receive buffer size", err)
	}
	// Errors carry the failing request's header only, not its payload (up to 64 KiB of elements).
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1); err != nil {
		return fail("NETLINK_CAP_ACK", err)
	}
	// The kernel answers before sendmsg returns (nfnetlink processes a batch in the sender's context); the
	// timeout only guards against a reply that never comes.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 60}); err != nil {
		return fail("receive timeout", err)
	}
	return fd, nil
}

// messageError is the kernel's error for message index of a batch.
type messageError struct {
	index int
	errno syscall.Errno
}

func (e *messageError) Error() string { return fmt.Sprintf("netlink message %d: %v", e.index, e.errno) }

func (e *messageError) Unwrap() error { return e.errno }

// transact sends one batch (begin, requests, end) with an acknowledgement asked for its last request only,
// and no echo, as `nft -f` does: nf_tables still reports every failing request (the transaction is then
// aborted whole), so the answers are the errors, if any, followed by that acknowledgement (or by the last
// request's error). An error about the batch itself names the batch begin.
func transact(fd int, msgs []netlink.Message) error {
	if len(msgs) < 3 {
		return nil
	}
	last := len(msgs) - 2
	seqIndex := make(map[uint32]int, len(msgs))
	var buf []byte
	for i := range msgs {
		m := msgs[i]
		m.Header.PID = 0
		m.Header.Flags &^= netlink.Acknowledge | netlink.Echo
		if i == last {
			m.Header.Flags |= netlink.Acknowledge
		}
		seqIndex[m.Header.Sequence] = i
		b, err := m.MarshalBinary()
		if err != nil {
			return fmt.Errorf("encode netlink message %d: %w", i, err)
		}
		buf = append(buf, b...)
	}
	if sz, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && sz < len(buf)+(64<<10) {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, len(buf)+(64<<10)); err != nil {
			return fmt.Errorf("send buffer for a batch of %d bytes: %w", len(buf), err)
		}
	}
	if err := unix.Sendto(fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send nf_tables batch of %d messages (%d bytes): %w", len(msgs), len(buf), err)
	}
	lastSeq, beginSeq := msgs[last].Header.Sequence, msgs[0].Header.Sequence
	rb := make([]byte, 1<<20)
	var first error
	for {
		n, _, err := unix.Recvfrom(fd, rb, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return errors.Join(first, fmt.Errorf("receive nf_tables answer: %w", err))
		}
		replies, err := syscall.ParseNetlinkMessage(rb[:n])
		if err != nil {
			return errors.Join(first, fmt.Errorf("parse nf_tables answer: %w", err))
		}
		for _, r := range replies {
			if r.Header.Type != unix.NLMSG_ERROR || len(r.Data) < 4+unix.SizeofNlMsghdr {
				continue
			}
			errno := -int32(binary.NativeEndian.Uint32(r.Data[:4]))
			seq := binary.NativeEndian.Uint32(r.Data[4+8 : 4+12])
			if errno != 0 && first == nil {
				first = &messageError{index: seqIndex[seq], errno: syscall.Errno(errno)}
			}
			if seq == lastSeq || (errno != 0 && seq == beginSeq) {
				return first
			}
		}
	}
}

// queue turns ops into the netlink requests of one transaction on conn.
func queue(conn *nftables.Conn, ops []op) error {
	t := ipTable()
	chain := func(name string) *nftables.Chain { return &nftables.Chain{Name: name, Table: t} }
	vmap := func(name string) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, IsMap: true, KeyType: mapKeys[name], DataType: nftables.TypeVerdict}
	}
	for _, o := range ops {
		var err error
		switch o.kind {
		case opAddTable:
			conn.AddTable(t)
		case opAddMap:
			err = conn.AddSet(vmap(o.name), nil)
		case opAddSet:
			err = conn.AddSet(&nftables.Set{Table: t, Name: o.name, KeyType: nftables.TypeIPAddr, HasTimeout: true, Dynamic: true, Timeout: o.timeout}, nil)
		case opAddChain:
			c := chain(o.name)
			if b := o.chain.Base; b != nil {
				c.Type, c.Hooknum, c.Priority = b.Type, b.Hook, b.Priority
				accept := nftables.ChainPolicyAccept
				c.Policy = &accept
			}
			conn.AddChain(c)
		case opFlushChain:
			conn.FlushChain(chain(o.name))
		case opAddRule:
			err = addRule(conn, t, chain(o.name), o.rule)
		case opFlushMap:
			conn.FlushSet(vmap(o.name))
		case opAddElements, opDelElements:
			for _, part := range chunks(o.elems) {
				if o.kind == opAddElements {
					err = errors.Join(err, conn.SetAddElements(vmap(o.name), setElements(part)))
				} else {
					err = errors.Join(err, conn.SetDeleteElements(vmap(o.name), setElements(part)))
				}
			}
		case opDelChain:
			conn.DelChain(chain(o.name))
		case opDelSet:
			conn.DelSet(&nftables.Set{Table: t, Name: o.name})
		}
		if err != nil {
			return fmt.Errorf("nftables: %s: %w", o, err)
		}
	}
	return nil
}

// elementsPerMessage bounds the elements of one netlink message: the element list is one netlink attribute,
// whose length is 16 bits (64 KiB), and an element with its goto chain name takes up to ~300 bytes.
const elementsPerMessage = 200

func chunks(els []Element) [][]Element {
	var out [][]Element
	for len(els) > elementsPerMessage {
		out = append(out, els[:elementsPerMessage])
		els = els[elementsPerMessage:]
	}
	return append(out, els)
}

func setElements(els []Element) []nftables.SetElement {
	out := make([]nftables.SetElement, len(els))
	for i, e := range els {
		out[i] = nftables.SetElement{Key: e.Key, VerdictData: &expr.Verdict{Kind: e.Verdict, Chain: e.Chain}}
	}
	return out
}

// addRule queues r in chain c, preceded by its anonymous numgen verdict map when it has one.
func addRule(conn *nftables.Conn, t *nftables.Table, c *nftables.Chain, r Rule) error {
	exprs := r.exprs
	if len(r.vmap) > 0 {
		m := &nftables.Set{Table: t, Anonymous: true, Constant: true, IsMap: true, KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
		els := make([]nftables.SetElement, len(r.vmap))
		for i, target := range r.vmap {
			els[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: target}}
		}
		if err := conn.AddSet(m, els); err != nil {
			return err
		}
		exprs = append(append([]expr.Any{}, exprs...),
			&expr.Numgen{Register: 1, Modulus: uint32(len(r.vmap)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, DestRegister: 0, SetName: m.Name, SetID: m.ID})
	}
	conn.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: exprs})
	return nil
}

// Cleanup deletes nodekit's table, and with it every chain, map and set the nftables backend wrote, in the
// network namespace of the caller. Nothing else is touched. It is idempotent.
func Cleanup(context.Context) error {
	st, err := listTable()
	if err != nil {
		if errors.Is(err, syscall.EPROTONOSUPPORT) {
			return nil // no nf_tables in this kernel: nothing of ours can exist
		}
		return fmt.Errorf("nftables cleanup: %w", err)
	}
	if !st.exists {
		return nil
	}
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables cleanup: %w", err)
	}
	conn.DelTable(ipTable())
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("nftables cleanup: delete table ip %s: %w", TableName, err)
	}
	return nil
}
