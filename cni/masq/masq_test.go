package masq

import (
	"net"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/coreos/go-iptables/iptables"
)

// TestTeardownSharedChain runs in a fresh network namespace (iptables state is per namespace): two
// podCIDRs of one network share the chain; tearing one down keeps the chain for the other, and a
// duplicated jump is removed in full.
func TestTeardownSharedChain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and iptables")
	}
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Close(); testutils.UnmountNS(netns) })
	_, a, _ := net.ParseCIDR("10.77.1.0/24")
	_, b, _ := net.ParseCIDR("10.77.2.0/24")
	_, cluster, _ := net.ParseCIDR("10.77.0.0/16")
	err = netns.Do(func(ns.NetNS) error {
		ipt, err := iptables.New()
		if err != nil {
			return err
		}
		if err := Ensure(ipt, "lab", []*net.IPNet{a}, cluster); err != nil {
			t.Fatal(err)
		}
		if err := Ensure(ipt, "lab", []*net.IPNet{b}, cluster); err != nil {
			t.Fatal(err)
		}
		// A duplicate jump, as a racing writer could leave.
		if err := ipt.Append("nat", "POSTROUTING", jumpRule("lab", a)...); err != nil {
			t.Fatal(err)
		}
		if err := Teardown(ipt, "lab", []*net.IPNet{a}); err != nil {
			t.Fatalf("teardown of a: %v", err)
		}
		if ok, _ := ipt.Exists("nat", "POSTROUTING", jumpRule("lab", a)...); ok {
			t.Fatal("a jump to the masquerade chain is left for 10.77.1.0/24")
		}
		if ok, _ := ipt.ChainExists("nat", ChainName("lab")); !ok {
			t.Fatal("chain removed while 10.77.2.0/24 still uses it")
		}
		if err := Teardown(ipt, "lab", []*net.IPNet{b}); err != nil {
			t.Fatalf("teardown of b: %v", err)
		}
		if ok, _ := ipt.ChainExists("nat", ChainName("lab")); ok {
			t.Fatal("chain left after its last user was torn down")
		}
		return Teardown(ipt, "lab", []*net.IPNet{b}) // twice is fine
	})
	if err != nil {
		t.Fatal(err)
	}
}
