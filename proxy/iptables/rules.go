package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/proxy/state"
)

// Chain names nodekit owns. Every chain nodekit creates starts with ChainPrefix, which is how Cleanup and
// stale-chain removal recognise them; per-service chain names are ChainPrefix + kind + a 16-character hash,
// 28 characters in all (the iptables limit).
const (
	ChainPrefix = "NODEKIT-"

	ChainServices         = "NODEKIT-SERVICES"          // nat: ClusterIP/external IP → service chain; filter: REJECT/DROP
	ChainExternalServices = "NODEKIT-EXTERNAL-SERVICES" // filter: REJECT/DROP for NodePorts and external IPs
	ChainNodePorts        = "NODEKIT-NODEPORTS"         // nat: NodePort → external chain
	ChainPostrouting      = "NODEKIT-POSTROUTING"       // nat: MASQUERADE what was marked
	ChainMarkMasq         = "NODEKIT-MARK-MASQ"         // nat: set the masquerade mark
	ChainForward          = "NODEKIT-FORWARD"           // filter: accept marked and established service traffic

	// MasqueradeMark is the packet mark bit that asks NODEKIT-POSTROUTING to masquerade (kube-proxy's 0x4000).
	MasqueradeMark = "0x4000"
)

// The tables nodekit writes.
const (
	TableNAT    = "nat"
	TableFilter = "filter"
)

// Config holds the node facts the rules depend on.
type Config struct {
	// ClusterCIDR is the pod network; ClusterIP traffic from outside it is masqueraded. Invalid (zero) means
	// unknown: no such masquerade rule, as kube-proxy without --cluster-cidr.
	ClusterCIDR netip.Prefix
	// LocalhostNodePorts makes NodePorts answer on 127.0.0.0/8 too (needs route_localnet, set by the Syncer).
	LocalhostNodePorts bool
	// BatchChains caps the chains one iptables-restore run declares (see splitBatches); 0 means
	// DefaultBatchChains, negative means no cap (every sync is one run).
	BatchChains int
}

// DefaultBatchChains is the default Config.BatchChains: partial syncs and full syncs of up to ~120 Services
// are one transaction; beyond that, iptables-nft-restore's cost stays near linear (10k Services × 3
// endpoints: 5.5 s in runs of 500 chains, 6.9 s in runs of 1000, 9.7 s in runs of 2000; bench/proxy).
const DefaultBatchChains = 500

func (c Config) batchChains() int {
	switch {
	case c.BatchChains == 0:
		return DefaultBatchChains
	case c.BatchChains < 0:
		return 0
	}
	return c.BatchChains
}

// jump is a rule in a built-in chain that hands packets to a nodekit chain.
type jump struct {
	table, chain string
	spec         []string
}

// jumps are the entry points from the built-in chains, in kube-proxy's places.
var jumps = []jump{
	{TableNAT, "PREROUTING", []string{"-m", "comment", "--comment", "nodekit service portals", "-j", ChainServices}},
	{TableNAT, "OUTPUT", []string{"-m", "comment", "--comment", "nodekit service portals", "-j", ChainServices}},
	{TableNAT, "POSTROUTING", []string{"-m", "comment", "--comment", "nodekit postrouting rules", "-j", ChainPostrouting}},
	{TableFilter, "INPUT", []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "nodekit external service portals", "-j", ChainExternalServices}},
	{TableFilter, "FORWARD", []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "nodekit external service portals", "-j", ChainExternalServices}},
	{TableFilter, "FORWARD", []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "nodekit service portals", "-j", ChainServices}},
	{TableFilter, "OUTPUT", []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "nodekit service portals", "-j", ChainServices}},
	{TableFilter, "FORWARD", []string{"-m", "comment", "--comment", "nodekit forwarding rules", "-j", ChainForward}},
}

// topChains are the chains every Ruleset has, declared first (the entry points and masquerade).
var topChains = map[string][]string{
	TableNAT:    {ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq},
	TableFilter: {ChainServices, ChainExternalServices, ChainForward},
}

// Ruleset is the complete desired content of nodekit's chains: per table, chain name → rule lines
// ("-A CHAIN ..." as iptables-restore reads them), plus the order chains were first declared in.
type Ruleset struct {
	Tables map[string]*Table
}

// Table holds one table's nodekit chains.
type Table struct {
	Order  []string
	Chains map[string][]string
}

// NewTable returns a Table holding nodekit's top-level chains of table ("nat" or "filter"), empty.
func NewTable(table string) *Table {
	t := &Table{Chains: map[string][]string{}}
	for _, c := range topChains[table] {
		t.Add(c)
	}
	return t
}

// Add declares chain (if new) and appends one rule made of parts; with no parts it only declares the chain.
func (t *Table) Add(chain string, parts ...string) {
	if _, ok := t.Chains[chain]; !ok {
		t.Order = append(t.Order, chain)
		t.Chains[chain] = nil
	}
	if len(parts) > 0 {
		t.Chains[chain] = append(t.Chains[chain], "-A "+chain+" "+strings.Join(parts, " "))
	}
}

// Rules returns the number of rules in the table.
func (t *Table) Rules() int {
	n := 0
	for _, r := range t.Chains {
		n += len(r)
	}
	return n
}

// chainName returns ChainPrefix+kind+"-"+the first 16 base32 characters of sha256(key), like kube-proxy's
// servicePortChainName, so names are stable across restarts and fit iptables' 28-character limit.
func chainName(kind, key string) string {
	h := sha256.Sum256([]byte(key))
	return ChainPrefix + kind + "-" + base32.StdEncoding.EncodeToString(h[:])[:16]
}

func svcChain(sp *state.ServicePort) string { return chainName("SVC", sp.Name.String()) }
func svlChain(sp *state.ServicePort) string { return chainName("SVL", sp.Name.String()) }
func extChain(sp *state.ServicePort) string { return chainName("EXT", sp.Name.String()) }
func sepChain(sp *state.ServicePort, e state.Endpoint) string {
	return chainName("SEP", sp.Name.String()+"|"+e.String())
}

func proto(p v1.Protocol) string { return strings.ToLower(string(p)) }

// Comment is "-m comment --comment <quoted s>".
func Comment(s string) []string { return []string{"-m", "comment", "--comment", strconv.Quote(s)} }

// dport is "-p tcp -m tcp --dport N".
func dport(p v1.Protocol, port int32) []string {
	return []string{"-p", proto(p), "-m", proto(p), "--dport", strconv.Itoa(int(port))}
}

func host(a netip.Addr) string { return a.String() + "/32" }

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Build computes the Ruleset for a snapshot, following kube-proxy's iptables mode:
//
//   - nat NODEKIT-SERVICES sends ClusterIP traffic to the port's internal-policy chain (SVC- for Cluster, SVL-
//     for Local) and external-IP traffic to its EXT- chain, then hands local destinations to NODEKIT-NODEPORTS.
//   - SVC-/SVL- chains pick an endpoint (SEP-) with -m statistic --mode random --probability 1/(n-i), after
//     -m recent checks for sessionAffinity ClientIP; SVC- first marks ClusterIP traffic from outside the
//     cluster CIDR for masquerade.
//   - SEP- chains mark hairpin traffic (source = the endpoint) for masquerade and DNAT.
//   - EXT- chains mark for masquerade and go to SVC- (policy Cluster), or keep the client source and go to SVL-
//     (policy Local; pod and node-local clients still take the internal chain).
//   - filter NODEKIT-SERVICES / NODEKIT-EXTERNAL-SERVICES REJECT ports that have no endpoint at all and DROP
//     those whose traffic policy leaves no endpoint on this node.
func Build(snap *state.Snapshot, cfg Config) *Ruleset {
	rs := NewRuleset()
	nat, filter := rs.Tables[TableNAT], rs.Tables[TableFilter]
	for _, sp := range snap.Ports {
		buildPort(nat, filter, sp, cfg)
	}
	local := []string{"-m", "addrtype", "--dst-type", "LOCAL"}
	if !cfg.LocalhostNodePorts {
		local = append([]string{"!", "-d", "127.0.0.0/8"}, local...)
	}
	nat.Add(ChainServices, cat(Comment("nodekit service nodeports; NOTE: this must be the last rule in this chain"), local, []string{"-j", ChainNodePorts})...)
	return rs
}

// NewRuleset returns the rules every mode has: the masquerade mark and its MASQUERADE, and the filter
// FORWARD acceptance of marked and established service traffic (needed when FORWARD's policy is DROP).
func NewRuleset() *Ruleset {
	rs := &Ruleset{Tables: map[string]*Table{TableFilter: NewTable(TableFilter), TableNAT: NewTable(TableNAT)}}
	nat, filter := rs.Tables[TableNAT], rs.Tables[TableFilter]

	nat.Add(ChainMarkMasq, "-j", "MARK", "--or-mark", MasqueradeMark)
	nat.Add(ChainPostrouting, "-m", "mark", "!", "--mark", MasqueradeMark+"/"+MasqueradeMark, "-j", "RETURN")
	nat.Add(ChainPostrouting, "-j", "MARK", "--xor-mark", MasqueradeMark)
	nat.Add(ChainPostrouting, cat(Comment("nodekit service traffic requiring SNAT"), []string{"-j", "MASQUERADE", "--random-fully"})...)
	filter.Add(ChainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	filter.Add(ChainForward, cat(Comment("nodekit forwarding rules"), []string{"-m", "mark", "--mark", MasqueradeMark + "/" + MasqueradeMark, "-j", "ACCEPT"})...)
	filter.Add(ChainForward, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	return rs
}

func buildPort(nat, filter *Table, sp *state.ServicePort, cfg Config) {
	name := sp.Name.String()
	internal, external := sp.InternalEndpoints(), sp.ExternalEndpoints()
	clusterEPs, localEPs := sp.ClusterEndpoints(), sp.LocalEndpoints()
	usesCluster := !sp.InternalLocal || (sp.HasExternal() && !sp.ExternalLocal)
	usesLocal := sp.InternalLocal || (sp.HasExternal() && sp.ExternalLocal)

	internalChain := svcChain(sp)
	if sp.InternalLocal {
		internalChain = svlChain(sp)
	}
	externalChain := svcChain(sp)
	if sp.ExternalLocal {
		externalChain = svlChain(sp)
	}
	cipMatch := cat([]string{"-d", host(sp.ClusterIP)}, dport(sp.Protocol, sp.Port))

	// Cluster-policy chain.
	var chosen [][]state.Endpoint
	if usesCluster && len(clusterEPs) > 0 {
		chosen = append(chosen, clusterEPs)
		c := svcChain(sp)
		nat.Add(c)
		if cfg.ClusterCIDR.IsValid() {
			nat.Add(c, cat([]string{"!", "-s", cfg.ClusterCIDR.String()}, cipMatch, []string{"-j", ChainMarkMasq})...)
		}
		endpointJumps(nat, c, sp, clusterEPs)
	}
	// Local-policy chain.
	if usesLocal && len(localEPs) > 0 {
		chosen = append(chosen, localEPs)
		c := svlChain(sp)
		nat.Add(c)
		endpointJumps(nat, c, sp, localEPs)
	}
	// Endpoint chains.
	seps := map[string]bool{}
	for _, eps := range chosen {
		for _, e := range eps {
			if c := sepChain(sp, e); !seps[c] {
				seps[c] = true
				nat.Add(c, "-s", host(e.IP), "-j", ChainMarkMasq)
				dnat := []string{"-p", proto(sp.Protocol)}
				if sp.AffinityTimeout > 0 {
					dnat = append(dnat, "-m", "recent", "--set", "--name", c, "--mask", "255.255.255.255", "--rsource")
				}
				dnat = append(dnat, "-m", proto(sp.Protocol), "-j", "DNAT", "--to-destination", e.String())
				nat.Add(c, dnat...)
			}
		}
	}

	// ClusterIP.
	switch {
	case len(internal) > 0:
		nat.Add(ChainServices, cat(cipMatch, Comment(name+" cluster IP"), []string{"-j", internalChain})...)
	case sp.HasEndpoints():
		filter.Add(ChainServices, cat(cipMatch, Comment(name+" has no local endpoints"), []string{"-j", "DROP"})...)
	default:
		filter.Add(ChainServices, cat(cipMatch, Comment(name+" has no endpoints"), []string{"-j", "REJECT", "--reject-with", "icmp-port-unreachable"})...)
	}
	if !sp.HasExternal() {
		return
	}

	// External entry points: external IPs and the NodePort.
	if len(external) > 0 {
		c := extChain(sp)
		nat.Add(c)
		if !sp.ExternalLocal {
			nat.Add(c, cat(Comment("masquerade traffic for "+name+" external destinations"), []string{"-j", ChainMarkMasq})...)
		} else {
			if cfg.ClusterCIDR.IsValid() && len(internal) > 0 {
				nat.Add(c, cat([]string{"-s", cfg.ClusterCIDR.String()}, Comment("pod traffic for "+name+" external destinations"), []string{"-j", internalChain})...)
			}
			nat.Add(c, cat(Comment("masquerade LOCAL traffic for "+name+" external destinations"), []string{"-m", "addrtype", "--src-type", "LOCAL", "-j", ChainMarkMasq})...)
			if len(internal) > 0 {
				nat.Add(c, cat(Comment("route LOCAL traffic for "+name+" external destinations"), []string{"-m", "addrtype", "--src-type", "LOCAL", "-j", internalChain})...)
			}
		}
		nat.Add(c, "-j", externalChain)
		for _, ip := range sp.ExternalIPs {
			nat.Add(ChainServices, cat([]string{"-d", host(ip)}, dport(sp.Protocol, sp.Port), Comment(name+" external IP"), []string{"-j", c})...)
		}
		if sp.NodePort != 0 {
			nat.Add(ChainNodePorts, cat(dport(sp.Protocol, sp.NodePort), Comment(name), []string{"-j", c})...)
		}
		return
	}
	target := []string{"-j", "REJECT", "--reject-with", "icmp-port-unreachable"}
	why := " has no endpoints"
	if sp.HasEndpoints() {
		target, why = []string{"-j", "DROP"}, " has no local endpoints"
	}
	for _, ip := range sp.ExternalIPs {
		filter.Add(ChainExternalServices, cat([]string{"-d", host(ip)}, dport(sp.Protocol, sp.Port), Comment(name+why), target)...)
	}
	if sp.NodePort != 0 {
		filter.Add(ChainExternalServices, cat([]string{"-m", "addrtype", "--dst-type", "LOCAL"}, dport(sp.Protocol, sp.NodePort), Comment(name+why), target)...)
	}
}

// endpointJumps writes the endpoint selection of chain c: affinity checks first, then random choice.
func endpointJumps(nat *Table, c string, sp *state.ServicePort, eps []state.Endpoint) {
	if sp.AffinityTimeout > 0 {
		for _, e := range eps {
			sep := sepChain(sp, e)
			nat.Add(c, "-m", "recent", "--name", sep, "--mask", "255.255.255.255", "--rsource", "--rcheck",
				"--seconds", strconv.Itoa(int(sp.AffinityTimeout)), "--reap", "-j", sep)
		}
	}
	n := len(eps)
	for i, e := range eps {
		sep := sepChain(sp, e)
		if i < n-1 {
			nat.Add(c, "-m", "statistic", "--mode", "random", "--probability", fmt.Sprintf("%0.10f", 1.0/float64(n-i)), "-j", sep)
		} else {
			nat.Add(c, "-j", sep)
		}
	}
}
