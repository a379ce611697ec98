package nftables

import (
	"context"
	"net/netip"
	"os/exec"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
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

func TestSyncTry(t *testing.T) {
	node := testns.New(t)
	err := node.Do(func(ns.NetNS) error {
		ctx := context.Background()
		s, err := New(Config{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := port("a", "10.96.0.10", 80, v1.ProtocolTCP, "10.244.1.1", "10.244.1.2")
		b := port("b", "10.96.0.11", 53, v1.ProtocolUDP, "10.244.1.3")
		b.NodePort = 30053
		b.AffinityTimeout = 30
		c := port("c", "10.96.0.12", 80, v1.ProtocolTCP)
		res, err := s.Sync(ctx, &state.Snapshot{Ports: []*state.ServicePort{a, b, c}}, false)
		t.Logf("%+v %v", res, err)
		t.Log(nftList(t))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
