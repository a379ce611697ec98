package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/proxy/state"
)

// TableName is nodekit's one nf_tables table, of family ip ("ip nodekit-proxy"). Everything the nftables
// backend writes is in it, so Cleanup deletes the table and nothing else.
const TableName = "nodekit-proxy"

// MasqueradeMark is the packet mark bit that asks the masquerading chain to masquerade (kube-proxy's 0x4000,
// the same bit as the iptables backend's).
const MasqueradeMark = 0x4000

// The fixed chains of the table. Base chains hook into netfilter; the others are jumped to.
const (
	chainNATPrerouting    = "nat-prerouting"  // nat prerouting dstnat: → services
	chainNATOutput        = "nat-output"      // nat output dstnat: → services
	chainNATPostrouting   = "nat-postrouting" // nat postrouting srcnat: → masquerading
	chainFilterInput      = "filter-input"    // filter input: REJECT/DROP of NodePorts and external IPs without endpoints
	chainFilterForward    = "filter-forward"  // filter forward: invalid DROP, REJECT/DROP without endpoints
	chainFilterOutput     = "filter-output"   // filter output: REJECT/DROP of ClusterIPs without endpoints
	chainServices         = "services"        // ClusterIP/external IP vmap, then the NodePort vmap for local destinations
	chainServiceEPCheck   = "service-endpoints-check"
	chainNodePortEPCheck  = "nodeport-endpoints-check"
	chainMasquerading     = "masquerading"
	chainMarkForMasq      = "mark-for-masquerade"
	chainReject           = "reject-chain"
	mapServiceIPs         = "service-ips"           // daddr . proto . port → goto service/external chain
	mapServiceNodePorts   = "service-nodeports"     // proto . port → goto external chain
	mapNoEndpointServices = "no-endpoint-services"  // daddr . proto . port → goto reject-chain / drop
	mapNoEndpointNodePort = "no-endpoint-nodeports" // proto . port → goto reject-chain / drop
)

// filterPriority runs the filter base chains just before DNAT (dstnat is -100), as kube-proxy's nftables
// mode: in output, ClusterIPs are still the destination.
var filterPriority = nftables.ChainPriorityRef(-110)

var (
	keyIPProtoPort = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	keyProtoPort   = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
)

// mapKeys are the key types of the table's verdict maps.
var mapKeys = map[string]nftables.SetDatatype{
	mapServiceIPs:         keyIPProtoPort,
	mapServiceNodePorts:   keyProtoPort,
	mapNoEndpointServices: keyIPProtoPort,
	mapNoEndpointNodePort: keyProtoPort,
}

// Config holds the node facts the rules depend on.
type Config struct {
	// ClusterCIDR is the pod network; ClusterIP traffic from outside it is masqueraded. Invalid (zero) means
	// unknown: no such rule.
	ClusterCIDR netip.Prefix
	// LocalhostNodePorts makes NodePorts answer on 127.0.0.0/8 too (needs route_localnet, set by the Syncer).
	LocalhostNodePorts bool
}

// BaseChain is the netfilter hook of a base chain.
type BaseChain struct {
	Type     nftables.ChainType
	Hook     *nftables.ChainHook
	Priority *nftables.ChainPriority
}

// Chain is one chain of the table: its hook when it is a base chain, and its rules in order.
type Chain struct {
	Base  *BaseChain
	Rules []Rule
	text  string // content, once computed
}

// content is the chain's rules as text, which is what decides whether a sync rewrites it. It is computed
// once: a chain is not changed after Build.
func (c *Chain) content() string {
	if c.text == "" {
		var b strings.Builder
		for _, r := range c.Rules {
			b.WriteString(r.Text)
			b.WriteByte('\n')
		}
		c.text = b.String()
	}
	return c.text
}

// Rule is one nftables rule: Text is its nft syntax (what tests and the diff read), exprs the netlink
// expressions, and vmap, when set, the chains of an anonymous "numgen random mod len(vmap)" verdict map the
// rule ends with (created with the rule, in the same transaction).
type Rule struct {
	Text  string
	exprs []expr.Any
	vmap  []string
}

// Element is one element of a verdict map: the key's bytes (each field padded to 4 bytes, as nf_tables
// concatenations are) and its verdict ("goto <chain>" or "drop").
type Element struct {
	Key     []byte
	Verdict expr.VerdictKind
	Chain   string
	// Text is "key : verdict" in nft syntax.
	Text string
}

// Ruleset is the complete desired content of the table.
type Ruleset struct {
	// Chains by name.
	Chains map[string]*Chain
	// Maps holds the elements of each verdict map, by map name and then by the key's text.
	Maps map[string]map[string]Element
	// Affinity holds the per-endpoint sets of client addresses for sessionAffinity ClientIP, by set name,
	// with the timeout of their elements.
	Affinity map[string]time.Duration
}

// Rules returns the counts nodekit reports per kind: chains, rules and map elements.
func (rs *Ruleset) Rules() map[string]int {
	n, e := 0, 0
	for _, c := range rs.Chains {
		n += len(c.Rules)
	}
	for _, m := range rs.Maps {
		e += len(m)
	}
	return map[string]int{"chains": len(rs.Chains), "rules": n, "elements": e}
}

// rule builds a Rule, clause by clause, with its text and expressions side by side.
type rule struct {
	text []string
	ex   []expr.Any
	vmap []string
}

func newRule() *rule { return &rule{} }

func (r *rule) add(text string, ex ...expr.Any) *rule {
	r.text = append(r.text, text)
	r.ex = append(r.ex, ex...)
	return r
}

func (r *rule) done() Rule { return Rule{Text: strings.Join(r.text, " "), exprs: r.ex, vmap: r.vmap} }

func loadAddr(offset uint32, reg uint32) expr.Any {
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}
}

const (
	offSaddr = 12
	offDaddr = 16
)

func addrName(off uint32) string {
	if off == offSaddr {
		return "saddr"
	}
	return "daddr"
}

// addr matches "ip saddr|daddr [!=] prefix" (a /32 is written as the address).
func (r *rule) addr(off uint32, p netip.Prefix, neg bool) *rule {
	op, sym := expr.CmpOpEq, ""
	if neg {
		op, sym = expr.CmpOpNeq, "!= "
	}
	txt := p.String()
	if p.Bits() == 32 {
		txt = p.Addr().String()
	}
	ex := []expr.Any{loadAddr(off, 1)}
	if p.Bits() < 32 {
		mask := net4Mask(p.Bits())
		ex = append(ex, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}})
	}
	a := p.Masked().Addr().As4()
	ex = append(ex, &expr.Cmp{Op: op, Register: 1, Data: a[:]})
	return r.add("ip "+addrName(off)+" "+sym+txt, ex...)
}

func net4Mask(bits int) []byte {
	m := uint32(0xffffffff) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return binary.BigEndian.AppendUint32(nil, m)
}

func (r *rule) proto(p v1.Protocol) *rule {
	return r.add("meta l4proto "+protoName(p),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNum(p)}})
}

func (r *rule) dport(port int32) *rule {
	return r.add(fmt.Sprintf("th dport %d", port),
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(port))})
}

// fibLocal matches "fib saddr|daddr type local".
func (r *rule) fibLocal(saddr bool) *rule {
	f := &expr.Fib{Register: 1, ResultADDRTYPE: true, FlagSADDR: saddr, FlagDADDR: !saddr}
	which := "daddr"
	if saddr {
		which = "saddr"
	}
	return r.add("fib "+which+" type local", f,
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)})
}

// ctState matches "ct state <name>" for one conntrack state bit.
func (r *rule) ctState(bit uint32, name string) *rule {
	return r.add("ct state "+name,
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(bit), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)})
}

// vmapLookup is "<key> vmap @name" with the key loaded as a concatenation starting at register 1.
func (r *rule) vmapLookup(name string, withDaddr bool) *rule {
	var ex []expr.Any
	txt := "meta l4proto . th dport"
	reg := uint32(8) // NFT_REG32_00, which is NFT_REG_1
	if withDaddr {
		ex = append(ex, loadAddr(offDaddr, 1))
		txt = "ip daddr . " + txt
		reg++
	}
	ex = append(ex,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg},
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: name, IsDestRegSet: true, DestRegister: 0})
	return r.add(txt+" vmap @"+name, ex...)
}

func (r *rule) verdict(kind expr.VerdictKind, chain string) *rule {
	return r.add(verdictText(kind, chain), &expr.Verdict{Kind: kind, Chain: chain})
}

func verdictText(kind expr.VerdictKind, chain string) string {
	switch kind {
	case expr.VerdictJump:
		return "jump " + chain
	case expr.VerdictGoto:
		return "goto " + chain
	case expr.VerdictDrop:
		return "drop"
	case expr.VerdictReturn:
		return "return"
	case expr.VerdictAccept:
		return "accept"
	}
	return fmt.Sprintf("verdict %d", kind)
}

// numgen ends the rule with "numgen random mod N vmap { 0 : goto c0, … }".
func (r *rule) numgen(chains []string) *rule {
	var parts []string
	for i, c := range chains {
		parts = append(parts, fmt.Sprintf("%d : goto %s", i, c))
	}
	r.vmap = chains
	r.text = append(r.text, fmt.Sprintf("numgen random mod %d vmap { %s }", len(chains), strings.Join(parts, ", ")))
	return r
}

func protoName(p v1.Protocol) string { return strings.ToLower(string(p)) }

func protoNum(p v1.Protocol) byte { return state.ProtocolNumber(p) }

// key encodes a map key: [address .] protocol . port, each field padded to 4 bytes.
func key(ip netip.Addr, p v1.Protocol, port int32) ([]byte, string) {
	var b []byte
	txt := fmt.Sprintf("%s . %d", protoName(p), port)
	if ip.IsValid() {
		a := ip.As4()
		b = append(b, a[:]...)
		txt = ip.String() + " . " + txt
	}
	b = append(b, protoNum(p), 0, 0, 0, byte(port>>8), byte(port), 0, 0)
	return b, txt
}

// NewRuleset returns the fixed part of the table: base chains, dispatch and masquerade chains, empty maps.
func NewRuleset(cfg Config) *Ruleset {
	rs := &Ruleset{Chains: map[string]*Chain{}, Maps: map[string]map[string]Element{}, Affinity: map[string]time.Duration{}}
	for m := range mapKeys {
		rs.Maps[m] = map[string]Element{}
	}
	base := func(name string, t nftables.ChainType, h *nftables.ChainHook, p *nftables.ChainPriority, rules ...Rule) {
		rs.Chains[name] = &Chain{Base: &BaseChain{Type: t, Hook: h, Priority: p}, Rules: rules}
	}
	regular := func(name string, rules ...Rule) { rs.Chains[name] = &Chain{Rules: rules} }
	ctNew := func(to string) Rule {
		return newRule().ctState(expr.CtStateBitNEW, "new").verdict(expr.VerdictJump, to).done()
	}

	base(chainNATPrerouting, nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest,
		newRule().verdict(expr.VerdictJump, chainServices).done())
	base(chainNATOutput, nftables.ChainTypeNAT, nftables.ChainHookOutput, nftables.ChainPriorityNATDest,
		newRule().verdict(expr.VerdictJump, chainServices).done())
	base(chainNATPostrouting, nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource,
		newRule().verdict(expr.VerdictJump, chainMasquerading).done())
	base(chainFilterInput, nftables.ChainTypeFilter, nftables.ChainHookInput, filterPriority,
		ctNew(chainNodePortEPCheck), ctNew(chainServiceEPCheck))
	base(chainFilterForward, nftables.ChainTypeFilter, nftables.ChainHookForward, filterPriority,
		newRule().ctState(expr.CtStateBitINVALID, "invalid").verdict(expr.VerdictDrop, "").done(),
		ctNew(chainServiceEPCheck), ctNew(chainNodePortEPCheck))
	base(chainFilterOutput, nftables.ChainTypeFilter, nftables.ChainHookOutput, filterPriority,
		ctNew(chainServiceEPCheck))

	nodePorts := newRule().fibLocal(false)
	if !cfg.LocalhostNodePorts {
		nodePorts.addr(offDaddr, netip.MustParsePrefix("127.0.0.0/8"), true)
	}
	regular(chainServices,
		newRule().vmapLookup(mapServiceIPs, true).done(),
		nodePorts.vmapLookup(mapServiceNodePorts, false).done())
	regular(chainServiceEPCheck, newRule().vmapLookup(mapNoEndpointServices, true).done())
	regular(chainNodePortEPCheck, newRule().fibLocal(false).vmapLookup(mapNoEndpointNodePort, false).done())

	mark := binaryutil.NativeEndian.PutUint32(MasqueradeMark)
	loadMark := &expr.Meta{Key: expr.MetaKeyMARK, Register: 1}
	setMark := &expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1}
	regular(chainMasquerading,
		newRule().add(fmt.Sprintf("meta mark & %#x == 0", MasqueradeMark), loadMark,
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mark, Xor: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)}).
			verdict(expr.VerdictReturn, "").done(),
		newRule().add(fmt.Sprintf("meta mark set meta mark ^ %#x", MasqueradeMark), loadMark,
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(0xffffffff), Xor: mark},
			setMark).done(),
		newRule().add("masquerade fully-random", &expr.Masq{FullyRandom: true}).done())
	regular(chainMarkForMasq,
		newRule().add(fmt.Sprintf("meta mark set meta mark | %#x", MasqueradeMark), loadMark,
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(^uint32(MasqueradeMark)), Xor: mark},
			setMark).done())
	regular(chainReject, newRule().add("reject", &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3 /* ICMP port unreachable, as iptables REJECT */}).done())
	return rs
}

// chainName returns "<kind>-<8 base32 characters of sha256(key)>-<readable>", like kube-proxy's nftables
// names: stable across restarts, unique by the hash, and readable in `nft list table ip nodekit-proxy`.
func chainName(kind, key, readable string) string {
	h := sha256.Sum256([]byte(key))
	return kind + "-" + base32.StdEncoding.EncodeToString(h[:])[:8] + "-" + readable
}

func portID(sp *state.ServicePort) string {
	return sp.Name.Namespace + "/" + sp.Name.Name + "/" + protoName(sp.Protocol) + "/" + sp.Name.Port
}

// ServiceChain, LocalChain and ExternalChain name a service port's chains for traffic policy Cluster,
// policy Local, and its NodePort/external-IP entry; EndpointChain and AffinitySet name an endpoint's DNAT
// chain and its set of ClientIP-affine clients.
func ServiceChain(sp *state.ServicePort) string {
	return chainName("service", sp.Name.String(), portID(sp))
}

// LocalChain: see ServiceChain.
func LocalChain(sp *state.ServicePort) string {
	return chainName("local", sp.Name.String(), portID(sp))
}

// ExternalChain: see ServiceChain.
func ExternalChain(sp *state.ServicePort) string {
	return chainName("external", sp.Name.String(), portID(sp))
}

// EndpointChain: see ServiceChain.
func EndpointChain(sp *state.ServicePort, e state.Endpoint) string {
	return chainName("endpoint", sp.Name.String()+"|"+e.String(), portID(sp)+"__"+e.String())
}

// AffinitySet: see ServiceChain. The hash covers the timeout too: a set's timeout is fixed when it is
// created, so a new timeout makes a new set (and the old one is deleted in the same sync).
func AffinitySet(sp *state.ServicePort, e state.Endpoint) string {
	return chainName("affinity", fmt.Sprintf("%s|%s|%d", sp.Name, e, sp.AffinityTimeout), portID(sp)+"__"+e.String())
}

// Build computes the table's content for a snapshot. It follows the iptables backend's Build rule for rule,
// with verdict maps in place of the per-Service rules of the top-level chains:
//
//   - service-ips maps ClusterIP . protocol . port to the port's internal-policy chain (service- for Cluster,
//     local- for Local) and external IP . protocol . port to its external- chain; service-nodeports maps
//     protocol . NodePort of local destinations to the external- chain.
//   - service-/local- chains pick an endpoint- chain with "numgen random mod N vmap", after lookups in the
//     endpoints' affinity- sets for sessionAffinity ClientIP; service- first marks ClusterIP traffic from
//     outside the cluster CIDR for masquerade.
//   - endpoint- chains mark hairpin traffic (source = the endpoint) for masquerade, add the client to the
//     affinity set, and DNAT.
//   - external- chains mark for masquerade and go to service- (policy Cluster), or keep the client source
//     and go to local- (policy Local; pod and node-local clients still take the internal chain).
//   - no-endpoint-services / no-endpoint-nodeports REJECT ports that have no endpoint at all and DROP those
//     whose traffic policy leaves no endpoint on this node.
//
// Two ports claiming the same map key (an external IP equal to another Service's ClusterIP) are resolved
// in snapshot order: the first one keeps the key.
func Build(snap *state.Snapshot, cfg Config) *Ruleset {
	rs := NewRuleset(cfg)
	for _, sp := range snap.Ports {
		rs.merge(BuildPort(sp, cfg))
	}
	return rs
}

// BuildPort computes the chains, map elements and affinity sets of one service port (Build's content for
// that port alone; it holds no fixed chain). The nftables Syncer caches it per port, so a sync rebuilds only
// the ports that changed.
func BuildPort(sp *state.ServicePort, cfg Config) *Ruleset {
	rs := &Ruleset{Chains: map[string]*Chain{}, Maps: map[string]map[string]Element{}, Affinity: map[string]time.Duration{}}
	rs.addPort(sp, cfg)
	return rs
}

// merge adds the chains, sets and elements of part; an element whose key rs already has is not taken.
func (rs *Ruleset) merge(part *Ruleset) {
	for n, c := range part.Chains {
		rs.Chains[n] = c
	}
	for n, t := range part.Affinity {
		rs.Affinity[n] = t
	}
	for m, els := range part.Maps {
		if rs.Maps[m] == nil {
			rs.Maps[m] = map[string]Element{}
		}
		for k, e := range els {
			if _, taken := rs.Maps[m][k]; !taken {
				rs.Maps[m][k] = e
			}
		}
	}
}

func (rs *Ruleset) element(m string, ip netip.Addr, p v1.Protocol, port int32, kind expr.VerdictKind, chain string) {
	k, txt := key(ip, p, port)
	txt += " : " + verdictText(kind, chain)
	if rs.Maps[m] == nil {
		rs.Maps[m] = map[string]Element{}
	}
	rs.Maps[m][string(k)] = Element{Key: k, Verdict: kind, Chain: chain, Text: txt}
}

func (rs *Ruleset) addPort(sp *state.ServicePort, cfg Config) {
	internal, external := sp.InternalEndpoints(), sp.ExternalEndpoints()
	clusterEPs, localEPs := sp.ClusterEndpoints(), sp.LocalEndpoints()
	usesCluster := !sp.InternalLocal || (sp.HasExternal() && !sp.ExternalLocal)
	usesLocal := sp.InternalLocal || (sp.HasExternal() && sp.ExternalLocal)
	internalChain, externalChain := ServiceChain(sp), ServiceChain(sp)
	if sp.InternalLocal {
		internalChain = LocalChain(sp)
	}
	if sp.ExternalLocal {
		externalChain = LocalChain(sp)
	}
	host := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, 32) }

	var chosen [][]state.Endpoint
	if usesCluster && len(clusterEPs) > 0 {
		chosen = append(chosen, clusterEPs)
		c := &Chain{}
		if cfg.ClusterCIDR.IsValid() {
			c.Rules = append(c.Rules, newRule().addr(offDaddr, host(sp.ClusterIP), false).proto(sp.Protocol).dport(sp.Port).
				addr(offSaddr, cfg.ClusterCIDR, true).verdict(expr.VerdictJump, chainMarkForMasq).done())
		}
		c.Rules = append(c.Rules, endpointChoice(sp, clusterEPs)...)
		rs.Chains[ServiceChain(sp)] = c
	}
	if usesLocal && len(localEPs) > 0 {
		chosen = append(chosen, localEPs)
		rs.Chains[LocalChain(sp)] = &Chain{Rules: endpointChoice(sp, localEPs)}
	}
	for _, eps := range chosen {
		for _, e := range eps {
			name := EndpointChain(sp, e)
			if _, done := rs.Chains[name]; done {
				continue
			}
			c := &Chain{Rules: []Rule{newRule().addr(offSaddr, host(e.IP), false).verdict(expr.VerdictJump, chainMarkForMasq).done()}}
			if sp.AffinityTimeout > 0 {
				set := AffinitySet(sp, e)
				timeout := time.Duration(sp.AffinityTimeout) * time.Second
				rs.Affinity[set] = timeout
				c.Rules = append(c.Rules, newRule().add("update @"+set+" { ip saddr }", loadAddr(offSaddr, 1),
					&expr.Dynset{SrcRegKey: 1, SetName: set, Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: timeout}).done())
			}
			a := e.IP.As4()
			c.Rules = append(c.Rules, newRule().proto(sp.Protocol).add("dnat to "+e.String(),
				&expr.Immediate{Register: 1, Data: a[:]},
				&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(uint16(e.Port))},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true}).done())
			rs.Chains[name] = c
		}
	}

	// ClusterIP.
	switch {
	case len(internal) > 0:
		rs.element(mapServiceIPs, sp.ClusterIP, sp.Protocol, sp.Port, expr.VerdictGoto, internalChain)
	case sp.HasEndpoints():
		rs.element(mapNoEndpointServices, sp.ClusterIP, sp.Protocol, sp.Port, expr.VerdictDrop, "")
	default:
		rs.element(mapNoEndpointServices, sp.ClusterIP, sp.Protocol, sp.Port, expr.VerdictGoto, chainReject)
	}
	if !sp.HasExternal() {
		return
	}

	// External entry points: external IPs and the NodePort.
	if len(external) > 0 {
		name := ExternalChain(sp)
		c := &Chain{}
		if !sp.ExternalLocal {
			c.Rules = append(c.Rules, newRule().verdict(expr.VerdictJump, chainMarkForMasq).done())
		} else {
			if cfg.ClusterCIDR.IsValid() && len(internal) > 0 {
				c.Rules = append(c.Rules, newRule().addr(offSaddr, cfg.ClusterCIDR, false).verdict(expr.VerdictGoto, internalChain).done())
			}
			c.Rules = append(c.Rules, newRule().fibLocal(true).verdict(expr.VerdictJump, chainMarkForMasq).done())
			if len(internal) > 0 {
				c.Rules = append(c.Rules, newRule().fibLocal(true).verdict(expr.VerdictGoto, internalChain).done())
			}
		}
		c.Rules = append(c.Rules, newRule().verdict(expr.VerdictGoto, externalChain).done())
		rs.Chains[name] = c
		for _, ip := range sp.ExternalIPs {
			rs.element(mapServiceIPs, ip, sp.Protocol, sp.Port, expr.VerdictGoto, name)
		}
		if sp.NodePort != 0 {
			rs.element(mapServiceNodePorts, netip.Addr{}, sp.Protocol, sp.NodePort, expr.VerdictGoto, name)
		}
		return
	}
	kind, chain := expr.VerdictGoto, chainReject
	if sp.HasEndpoints() {
		kind, chain = expr.VerdictDrop, ""
	}
	for _, ip := range sp.ExternalIPs {
		rs.element(mapNoEndpointServices, ip, sp.Protocol, sp.Port, kind, chain)
	}
	if sp.NodePort != 0 {
		rs.element(mapNoEndpointNodePort, netip.Addr{}, sp.Protocol, sp.NodePort, kind, chain)
	}
}

// endpointChoice returns the rules of a service-/local- chain: affinity lookups first, then a random pick.
func endpointChoice(sp *state.ServicePort, eps []state.Endpoint) []Rule {
	var rules []Rule
	if sp.AffinityTimeout > 0 {
		for _, e := range eps {
			set := AffinitySet(sp, e)
			rules = append(rules, newRule().add("ip saddr @"+set, loadAddr(offSaddr, 1), &expr.Lookup{SourceRegister: 1, SetName: set}).
				verdict(expr.VerdictGoto, EndpointChain(sp, e)).done())
		}
	}
	chains := make([]string, len(eps))
	for i, e := range eps {
		chains[i] = EndpointChain(sp, e)
	}
	if len(chains) == 1 {
		return append(rules, newRule().verdict(expr.VerdictGoto, chains[0]).done())
	}
	return append(rules, newRule().numgen(chains).done())
}
