package containerd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/coreos/go-iptables/iptables"

	cniconfig "github.com/nodekit/nodekit/cni/config"
	"github.com/nodekit/nodekit/cni/masq"
	"github.com/nodekit/nodekit/cni/portmap"
	"github.com/nodekit/nodekit/runtime/containerd"
)

// nodekitNetworkPrefix starts the name of a NodekitConfList network: "nk-cri-<bridge>".
const nodekitNetworkPrefix = "nk-cri-"

// teardownNodekitRules removes what nodekit-cni keeps on the host per network once its pods are gone:
// the hostPort chains and the masquerade chain with its jump for subnet.
func teardownNodekitRules(network, subnet string) error {
	ipt, err := iptables.New()
	if err != nil {
		return fmt.Errorf("nodekit-cni rules of %s: %w", network, err)
	}
	var errs []error
	if _, err := portmap.GC(ipt, network, func(string, string) bool { return false }); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, portmap.Teardown(ipt, network))
	if _, sn, err := net.ParseCIDR(subnet); err == nil {
		errs = append(errs, masq.Teardown(ipt, network, []*net.IPNet{sn}))
	}
	return errors.Join(errs...)
}

// Sentinels rendered through cni/config and then turned into the containerd framework's placeholders.
const (
	sentinelSubnet = "10.254.254.0/24"
	sentinelBridge = "nksentinel0"
	sentinelData   = "/nodekit-sentinel-ipam"
)

// NodekitConfList is the agent's conflist (cni/config) with the framework's BRIDGE, SUBNET and IPAMDIR
// placeholders, so the private containerd gets a unique bridge, subnet and IPAM dir.
// The cniVersion follows the containerd under test: 1.x speaks CNI up to 1.0.0.
func NodekitConfList(t testing.TB) []byte {
	t.Helper()
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		bin = "containerd"
	}
	v, err := containerd.DetectVersion(t.Context(), bin)
	if err != nil {
		t.Fatalf("containerd version: %v", err)
	}
	cniVersion := cniconfig.CNIVersion
	if v.Major < 2 {
		cniVersion = "1.0.0"
	}
	t.Logf("containerd %s: conflist cniVersion %s", v, cniVersion)
	b, err := cniconfig.Render(cniconfig.Options{
		NetworkName: nodekitNetworkPrefix + sentinelBridge, PodCIDR: sentinelSubnet, ClusterCIDR: sentinelSubnet,
		Bridge: sentinelBridge, DataDir: sentinelData, CNIVersion: cniVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer(sentinelSubnet, "SUBNET", sentinelBridge, "BRIDGE", sentinelData, "IPAMDIR").Replace(string(b)))
}
