package bridge

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

// TestDeleteLinkGoneMeanwhile: a veth that vanishes between DEL's lookup and its delete (the kernel tearing
// a removed pod netns down) is deleted, not an error; any other failure still is one.
func TestDeleteLinkGoneMeanwhile(t *testing.T) {
	netNS, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create a network namespace (the test runs as root, as CI does): %v", err)
	}
	defer func() { _ = netNS.Close(); _ = testutils.UnmountNS(netNS) }()
	err = netNS.Do(func(ns.NetNS) error {
		la := netlink.NewLinkAttrs()
		la.Name = "nktest0"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "nktest1"}); err != nil {
			t.Fatalf("add veth: %v", err)
		}
		link, err := netlink.LinkByName("nktest0")
		if err != nil {
			t.Fatalf("look up veth: %v", err)
		}
		// Deleting the peer removes the pair: the looked-up link is now stale, as in the race.
		peer, err := netlink.LinkByName("nktest1")
		if err != nil {
			t.Fatalf("look up peer: %v", err)
		}
		if err := netlink.LinkDel(peer); err != nil {
			t.Fatalf("delete peer: %v", err)
		}
		if err := deleteLink(link); err != nil {
			t.Errorf("deleteLink of a link gone meanwhile: %v, want nil", err)
		}
		if err := DetachPod("nktest0"); err != nil {
			t.Errorf("DetachPod of a missing veth: %v, want nil", err)
		}
		bogus := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "nkbogus", Index: -5}}
		if err := deleteLink(bogus); err == nil {
			t.Errorf("deleteLink of an invalid index: nil, want an error")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
