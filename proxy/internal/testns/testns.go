// Package testns gives the proxy's tests a fresh network namespace of their own, so iptables, ipsets,
// conntrack and links they create never touch the host's; the namespace is removed by t.Cleanup.
package testns

import (
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// New returns a new network namespace removed when t ends. It skips t when not running as root (creating
// namespaces needs CAP_SYS_ADMIN) and fails t on any other error.
func New(t testing.TB) ns.NetNS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("network namespace: %v", err)
	}
	t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
	return n
}
