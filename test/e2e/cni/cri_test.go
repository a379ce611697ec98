package cni_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"github.com/vishvananda/netlink"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/cni/bridge"
	"github.com/nodekit/nodekit/cni/ipam"
	"github.com/nodekit/nodekit/cni/portmap"
	ctrd "github.com/nodekit/nodekit/test/framework/containerd"
)

// TestCRIPodOnNodekitCNI: containerd's CRI runs a pod sandbox through nodekit-cni (not the reference
// bridge): the pod IP comes from nodekit's IPAM on nodekit's veth, the demo server answers on the pod IP,
// and its hostPort answers on the node's IP.
func TestCRIPodOnNodekitCNI(t *testing.T) {
	// The runtime's Close also removes nodekit-cni's per-network masquerade and hostPort chains.
	rt := ctrd.Start(t, ctrd.Options{CNIBinDirs: []string{binDir, "/usr/lib/cni"}, ConfList: ctrd.NodekitConfList(t)})
	if rt.Bridge == "" || rt.Subnet == "" {
		t.Fatalf("the containerd framework did not assign a bridge and subnet: %q %q", rt.Bridge, rt.Subnet)
	}
	_, subnet, _ := net.ParseCIDR(rt.Subnet)

	hostPort := freePort(t)
	sb := rt.SandboxConfig("cni-e2e-"+suffix(), ctrd.Namespace)
	sb.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: int32(hostPort)}}
	id, ip := rt.RunSandbox(t, sb)
	podIP := net.ParseIP(ip)
	if podIP == nil || !subnet.Contains(podIP) {
		t.Fatalf("sandbox IP %q is not in the node's podCIDR %s", ip, subnet)
	}

	// The attachment is nodekit-cni's: its IPAM holds the IP for this sandbox and its veth is on the bridge.
	store, err := ipam.Open(filepath.Join(rt.Dir, "ipam"), "nk-cri-"+rt.Bridge, []ipam.Range{{Subnet: *subnet}})
	if err != nil {
		t.Fatal(err)
	}
	a, ok, err := store.Lookup(id, "eth0")
	if err != nil || !ok || !a.IP.Equal(podIP) {
		t.Fatalf("nodekit IPAM record for sandbox %s: %+v ok=%v err=%v, want %s", id, a, ok, err, podIP)
	}
	veth, err := netlink.LinkByName(bridge.HostVethName(id, "eth0"))
	if err != nil {
		t.Fatalf("nodekit veth of sandbox %s: %v", id, err)
	}
	br, err := netlink.LinkByName(rt.Bridge)
	if err != nil || veth.Attrs().MasterIndex != br.Attrs().Index {
		t.Fatalf("veth %s is not a port of bridge %s (%v)", veth.Attrs().Name, rt.Bridge, err)
	}

	rt.StartContainer(t, id, sb, ctrd.DemoContainerConfig("demo", "", sb, ip))
	direct, err := ctrd.WaitHTTP("http://"+net.JoinHostPort(ip, "8080")+"/json", 30*time.Second)
	if err != nil {
		t.Fatalf("demo server on pod IP %s: %v", ip, err)
	}
	if !strings.Contains(direct, sb.Metadata.Name) {
		t.Errorf("pod IP answered %q, not naming pod %s", direct, sb.Metadata.Name)
	}
	nodeIP := hostIP(t)
	viaHostPort, err := ctrd.WaitHTTP(fmt.Sprintf("http://%s/json", net.JoinHostPort(nodeIP.String(), fmt.Sprint(hostPort))), 10*time.Second)
	if err != nil {
		t.Fatalf("hostPort %d on node IP %s: %v", hostPort, nodeIP, err)
	}
	if !strings.Contains(viaHostPort, sb.Metadata.Name) {
		t.Errorf("hostPort answered %q, not naming pod %s", viaHostPort, sb.Metadata.Name)
	}

	// Removing the sandbox runs DEL: IP released, veth and hostPort rules gone.
	if _, err := rt.CRI.Runtime().StopPodSandbox(t.Context(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.CRI.Runtime().RemovePodSandbox(t.Context(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Lookup(id, "eth0"); ok {
		t.Errorf("IP of sandbox %s still allocated after RemovePodSandbox", id)
	}
	if _, err := netlink.LinkByName(bridge.HostVethName(id, "eth0")); err == nil {
		t.Errorf("veth of sandbox %s left after RemovePodSandbox", id)
	}
	ipt, err := iptables.New()
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := ipt.ChainExists("nat", portmap.PodChain("nk-cri-"+rt.Bridge, id, "eth0")); ok {
		t.Errorf("hostPort chain of sandbox %s left after RemovePodSandbox", id)
	}
}

// freePort is a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// hostIP is the node's primary IPv4 address: the source of its default route, else any global address.
func hostIP(t *testing.T) net.IP {
	t.Helper()
	routes, _ := netlink.RouteGet(net.IPv4(192, 0, 2, 1)) // TEST-NET-1; only looked up, never contacted
	for _, r := range routes {
		if r.Src != nil {
			return r.Src
		}
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.Scope == int(netlink.SCOPE_UNIVERSE) && !a.IP.IsLoopback() {
			return a.IP
		}
	}
	t.Skip("the host has no global IPv4 address to use as the node IP: " + fmt.Sprint(os.Hostname()))
	return nil
}
