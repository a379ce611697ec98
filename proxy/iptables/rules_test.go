package iptables

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/proxy/state"
)

func dump(rs *Ruleset) string {
	var b strings.Builder
	for _, tb := range []string{TableFilter, TableNAT} {
		t := rs.Tables[tb]
		for _, c := range t.Order {
			b.WriteString(tb + " :" + c + "\n")
			for _, r := range t.Chains[c] {
				b.WriteString(tb + " " + r + "\n")
			}
		}
	}
	return b.String()
}

func TestBuildTrafficPolicies(t *testing.T) {
	cfg := Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	np := port("np", "10.96.0.20", 80, v1.ProtocolTCP, "10.244.1.1", "10.244.2.1")
	np.NodePort = 30080
	np.ExternalLocal = true
	np.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.7")}
	np.Endpoints[0].Local = true
	noLocal := port("nolocal", "10.96.0.21", 80, v1.ProtocolTCP, "10.244.2.2")
	noLocal.NodePort = 30081
	noLocal.ExternalLocal = true
	empty := port("empty", "10.96.0.22", 53, v1.ProtocolUDP)
	empty.NodePort = 30082
	got := dump(Build(&state.Snapshot{Ports: []*state.ServicePort{np, noLocal, empty}}, cfg))

	for _, want := range []string{
		// policy Local: the EXT chain sends pods to the cluster chain, marks node-local clients, then SVL.
		"nat -A " + extChain(np) + " -s 10.244.0.0/16 ",
		"-m addrtype --src-type LOCAL -j " + ChainMarkMasq,
		"nat -A " + extChain(np) + " -j " + svlChain(np),
		"nat -A " + svlChain(np) + " -j " + sepChain(np, np.Endpoints[0]),
		"nat -A NODEKIT-NODEPORTS -p tcp -m tcp --dport 30080 ",
		"nat -A NODEKIT-SERVICES -d 192.0.2.7/32 -p tcp -m tcp --dport 80 ",
		// endpoints elsewhere only: external traffic dropped, ClusterIP still served.
		"filter -A NODEKIT-EXTERNAL-SERVICES -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 30081 -m comment --comment \"default/nolocal:/TCP has no local endpoints\" -j DROP",
		"nat -A NODEKIT-SERVICES -d 10.96.0.21/32 -p tcp -m tcp --dport 80 -m comment --comment \"default/nolocal:/TCP cluster IP\" -j " + svcChain(noLocal),
		// no endpoints at all: REJECT on both.
		"filter -A NODEKIT-SERVICES -d 10.96.0.22/32 -p udp -m udp --dport 53 -m comment --comment \"default/empty:/UDP has no endpoints\" -j REJECT",
		"--dport 30082 -m comment --comment \"default/empty:/UDP has no endpoints\" -j REJECT",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rules lack %q:\n%s", want, got)
		}
	}
	// The SVL chain holds only the local endpoint; the remote one is only in SVC.
	if strings.Contains(got, "-A "+svlChain(np)+" -m statistic") {
		t.Errorf("local chain balances over non-local endpoints:\n%s", got)
	}
	// The nodeports jump is the last rule of nat NODEKIT-SERVICES.
	nat := Build(&state.Snapshot{Ports: []*state.ServicePort{np, noLocal}}, cfg).Tables[TableNAT].Chains[ChainServices]
	if last := nat[len(nat)-1]; !strings.HasSuffix(last, "-j "+ChainNodePorts) {
		t.Errorf("last NODEKIT-SERVICES rule = %q", last)
	}
}

func TestBuildAffinityAndProbabilities(t *testing.T) {
	sp := port("s", "10.96.0.30", 80, v1.ProtocolTCP, "10.244.1.1", "10.244.1.2", "10.244.1.3", "10.244.1.4")
	sp.AffinityTimeout = 10800
	rs := Build(&state.Snapshot{Ports: []*state.ServicePort{sp}}, Config{})
	svc := rs.Tables[TableNAT].Chains[svcChain(sp)]
	if len(svc) != 8 { // 4 affinity checks + 4 choices, no masquerade rule without a cluster CIDR
		t.Fatalf("SVC chain has %d rules:\n%s", len(svc), strings.Join(svc, "\n"))
	}
	for i, p := range []string{"0.2500000000", "0.3333333333", "0.5000000000"} {
		if !strings.Contains(svc[4+i], "--probability "+p) {
			t.Errorf("rule %d = %q, want probability %s", 4+i, svc[4+i], p)
		}
	}
	if !strings.Contains(svc[0], "-m recent --name "+sepChain(sp, sp.Endpoints[0])+" --mask 255.255.255.255 --rsource --rcheck --seconds 10800 --reap") {
		t.Errorf("affinity check = %q", svc[0])
	}
	sep := rs.Tables[TableNAT].Chains[sepChain(sp, sp.Endpoints[1])]
	if len(sep) != 2 || !strings.Contains(sep[1], "-m recent --set --name "+sepChain(sp, sp.Endpoints[1])) || !strings.HasSuffix(sep[1], "--to-destination 10.244.1.2:8080") {
		t.Errorf("SEP chain = %q", sep)
	}
	for c := range rs.Tables[TableNAT].Chains {
		if len(c) > 28 {
			t.Errorf("chain name %q longer than iptables' 28 characters", c)
		}
	}
}
