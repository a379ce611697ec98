package ipvs

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/proxy/internal/testns"
	"github.com/nodekit/nodekit/proxy/state"
)

func sp(name, cip string, port int32, eps ...string) *state.ServicePort {
	s := &state.ServicePort{
		Name:      state.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Port: "p", Protocol: v1.ProtocolTCP},
		ClusterIP: netip.MustParseAddr(cip), Port: port, Protocol: v1.ProtocolTCP,
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, state.Endpoint{IP: netip.MustParseAddr(e), Port: 8080, Ready: true, Serving: true, NodeName: "n2"})
	}
	return s
}

func TestDesired(t *testing.T) {
	a := sp("a", "10.96.0.10", 80, "10.244.1.1", "10.244.2.1")
	a.AffinityTimeout = 300
	np := sp("np", "10.96.0.11", 80, "10.244.1.2", "10.244.2.2")
	np.NodePort = 30080
	np.ExternalLocal = true
	np.Endpoints[0].Local = true
	np.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.9")}
	empty := sp("empty", "10.96.0.12", 80)
	node := netip.MustParseAddr("10.201.0.2")
	vss, bind, sets := Desired(&state.Snapshot{Ports: []*state.ServicePort{a, np, empty}}, []netip.Addr{node}, "lc")

	got := map[string]string{}
	for _, v := range vss {
		var reals []string
		for _, r := range v.Reals {
			reals = append(reals, r.String())
		}
		got[v.Key()] = v.Scheduler + " " + strings.Join(reals, ",")
		if v.Key() == "TCP/10.96.0.10:80" && v.AffinityTimeout != 300 {
			t.Errorf("affinity timeout %d", v.AffinityTimeout)
		}
	}
	want := map[string]string{
		"TCP/10.96.0.10:80":    "lc 10.244.1.1:8080,10.244.2.1:8080",
		"TCP/10.96.0.11:80":    "lc 10.244.1.2:8080,10.244.2.2:8080", // ClusterIP: internal policy Cluster
		"TCP/192.0.2.9:80":     "lc 10.244.1.2:8080",                 // external: policy Local
		"TCP/10.201.0.2:30080": "lc 10.244.1.2:8080",
		"TCP/10.96.0.12:80":    "lc ",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("virtual server %s = %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("virtual servers %v", got)
	}
	wantBind := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.11"), netip.MustParseAddr("10.96.0.12"), netip.MustParseAddr("192.0.2.9")}
	if !slices.Equal(bind, wantBind) {
		t.Errorf("bind = %v", bind)
	}
	if !slices.Contains(sets[SetClusterIP], "10.96.0.11,tcp:80") || !slices.Contains(sets[SetLoopBack], "10.244.2.2,tcp:8080,10.244.2.2") {
		t.Errorf("ipsets = %v", sets)
	}
	if len(sets[SetNodePort]) != 0 { // policy Local NodePorts keep the client address
		t.Errorf("node port set = %v", sets[SetNodePort])
	}
}

// TestSyncIPVS programs a real kernel's IPVS; it needs ip_vs.
func TestSyncIPVS(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("kernel has no ip_vs: %v", err)
	}
	n := testns.New(t)
	err := n.Do(func(ns.NetNS) error {
		s, err := New(Config{}, nil)
		if err != nil {
			return err
		}
		a := sp("a", "10.96.0.10", 80, "10.244.1.1", "10.244.2.1")
		if _, err := s.Sync(context.Background(), &state.Snapshot{Ports: []*state.ServicePort{a}}, true); err != nil {
			return err
		}
		svcs, err := s.handle.GetServices()
		if err != nil || len(svcs) != 1 {
			t.Errorf("IPVS services %v %v", svcs, err)
		}
		return Cleanup(context.Background())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCleanupWithoutIPVS: --cleanup removes the dummy interface and the ipsets also on a kernel without
// ip_vs (a node switched from IPVS mode, or a half-started proxy).
func TestCleanupWithoutIPVS(t *testing.T) {
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Skip("ipset not installed")
	}
	n := testns.New(t)
	err := n.Do(func(ns.NetNS) error {
		s := &Syncer{}
		dummy := true
		if err := s.syncInterface([]netip.Addr{netip.MustParseAddr("10.96.0.10")}); errors.Is(err, unix.EOPNOTSUPP) {
			dummy = false
			t.Logf("kernel has no dummy interfaces (%v); checking the ipset part of Cleanup only", err)
		} else if err != nil {
			return err
		}
		if err := syncSets(context.Background(), map[string][]string{SetClusterIP: {"10.96.0.10,tcp:80"}, SetNodePort: {"tcp:30080"}}); err != nil {
			return err
		}
		out, err := exec.Command("ipset", "list", SetClusterIP).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "10.96.0.10,tcp:80") {
			t.Errorf("ipset %s: %v %s", SetClusterIP, err, out)
		}
		if err := Cleanup(context.Background()); err != nil {
			return err
		}
		if _, err := netlink.LinkByName(Interface); dummy && err == nil {
			t.Errorf("%s still exists after Cleanup", Interface)
		}
		if out, _ := exec.Command("ipset", "list", "-n").CombinedOutput(); strings.Contains(string(out), "NODEKIT") {
			t.Errorf("ipsets left: %s", out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
