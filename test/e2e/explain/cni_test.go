package explain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/cni/bridge"
	"github.com/nodekit/nodekit/cni/ipam"
	"github.com/nodekit/nodekit/cni/netconf"
	"github.com/nodekit/nodekit/explain"
)

// netnsDir is where containerd's CRI mounts the pods' network namespaces ("cni-<uuid>").
const netnsDir = "/var/run/netns"

// cniFailure: the node's podCIDR is exhausted (every free address of nodekit-cni's IPAM store reserved
// by the test), so nodekit-cni refuses the pod's CNI ADD; the verdict names the CNI step, the node and the
// plugin's error. The failed attempts leave no IP reservation, veth or netns behind; once the addresses
// are freed the kubelet's retry starts the pod. It runs after the parallel group: the node has no free
// address for any pod meanwhile.
func cniFailure(t *testing.T, c *cluster) {
	ctx := context.Background()
	store := c.ipamStore(t)
	netnsBefore := netnsEntries(t)

	var fillers []string
	t.Cleanup(func() { releaseAll(t, store, fillers) })
	for i := 0; ; i++ {
		id := fmt.Sprintf("explain-filler-%d", i)
		if _, err := store.Allocate(id, "eth0", ""); err != nil {
			if !strings.Contains(err.Error(), ipam.ErrExhausted.Error()) {
				t.Fatalf("fill the podCIDR: %v", err)
			}
			break
		}
		fillers = append(fillers, id)
	}
	t.Logf("reserved the %d free addresses of %s", len(fillers), c.rt.Subnet)

	p := demoPod("cnifailure")
	c.create(t, p)
	r := c.waitPod(t, p.Name, "ContainerCreating", "CNI ADD failed on node "+c.node+": no free pod IP address",
		"all addresses of ", "in "+c.rt.Subnet+" are allocated")
	if !r.Verdict.Stuck || !strings.Contains(r.Verdict.Fix, "podCIDR") || !hasStep(r, explain.ComponentKubelet, "FailedCreatePodSandBox") {
		t.Errorf("verdict %+v / timeline lacks FailedCreatePodSandBox", r.Verdict)
	}

	// At least two attempts failed; none left anything behind.
	var failed []string
	waitFor(t, 60*time.Second, "two failed sandbox attempts", func() bool {
		failed = c.failedSandboxes(t, p.Name)
		return len(failed) >= 2
	})
	c.checkNoLeaks(t, store, fillers, failed, netnsBefore)

	releaseAll(t, store, fillers)
	fillers = nil
	c.waitPod(t, p.Name, "Running", "Running and Ready on node "+c.node)
	if err := c.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d failed sandbox attempts left no IP, veth or netns; the pod ran once addresses were free", len(failed))
}

// ipamStore opens nodekit-cni's IPAM store of the node's network with the ranges the plugin uses (the
// conflist's first plugin, parsed as the plugin parses it).
func (c *cluster) ipamStore(t *testing.T) *ipam.Store {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.rt.CNIConfDir, "10-nodekit-test.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		CNIVersion string            `json:"cniVersion"`
		Name       string            `json:"name"`
		Plugins    []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Plugins) == 0 {
		t.Fatalf("conflist: %v", err)
	}
	var plugin map[string]any
	if err := json.Unmarshal(list.Plugins[0], &plugin); err != nil {
		t.Fatal(err)
	}
	plugin["cniVersion"], plugin["name"] = list.CNIVersion, list.Name
	stdin, _ := json.Marshal(plugin)
	conf, err := netconf.Parse(stdin)
	if err != nil {
		t.Fatal(err)
	}
	var ranges []ipam.Range
	for _, r := range conf.IPAM.Ranges {
		ranges = append(ranges, ipam.Range{Subnet: net.IPNet(r.Subnet), Start: r.RangeStart, End: r.RangeEnd, Gateway: r.Gateway})
	}
	store, err := ipam.Open(conf.IPAM.DataDir, conf.Name, ranges)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func releaseAll(t *testing.T, store *ipam.Store, ids []string) {
	for _, id := range ids {
		if _, _, err := store.Release(id, "eth0"); err != nil {
			t.Errorf("release %s: %v", id, err)
		}
	}
}

// sandboxIDRE finds the sandbox in containerd's error: `failed to setup network for sandbox "ID"`.
var sandboxIDRE = regexp.MustCompile(`sandbox \\?"([0-9a-f]{64})\\?"`)

// failedSandboxes are the IDs of the pod's sandboxes whose creation failed, from the kubelet's events.
func (c *cluster) failedSandboxes(t *testing.T, pod string) []string {
	t.Helper()
	evs, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=FailedCreatePodSandBox"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs.Items {
		for _, m := range sandboxIDRE.FindAllStringSubmatch(e.Message, -1) {
			if !slices.Contains(ids, m[1]) {
				ids = append(ids, m[1])
			}
		}
	}
	return ids
}

// checkNoLeaks: nodekit-cni's store holds the fillers and the runtime's live sandboxes only (none of
// the failed ones), every port of the node's bridge is a live sandbox's veth, and every pod network
// namespace (cni-*) that appeared since before is a live sandbox's or holds a process (a pod of another
// runtime on the host), awaited since a retry may be in flight.
func (c *cluster) checkNoLeaks(t *testing.T, store *ipam.Store, fillers, failed []string, netnsBefore map[string]bool) {
	t.Helper()
	var problems []string
	waitFor(t, 30*time.Second, "no leaked IP, veth or netns", func() bool {
		problems = nil
		sbs, err := c.rt.CRI.Runtime().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		live, veths, netnsLive := map[string]bool{}, map[string]bool{}, map[string]bool{}
		for _, sb := range sbs.Items {
			live[sb.Id], veths[bridge.HostVethName(sb.Id, "eth0")] = true, true
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				netnsLive[filepath.Base(c.rt.SandboxNetNS(t, sb.Id))] = true
			}
		}
		allocs, err := store.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			if !live[a.ContainerID] && !slices.Contains(fillers, a.ContainerID) {
				problems = append(problems, fmt.Sprintf("IP %s held by %s, no live sandbox", a.IP, a.ContainerID))
			}
		}
		for _, id := range failed {
			if live[id] {
				problems = append(problems, "failed sandbox "+id+" still listed")
			}
		}
		br, err := netlink.LinkByName(c.rt.Bridge)
		if err != nil {
			t.Fatal(err)
		}
		links, err := netlink.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Attrs().MasterIndex == br.Attrs().Index && !veths[l.Attrs().Name] {
				problems = append(problems, "veth "+l.Attrs().Name+" on "+c.rt.Bridge+" of no live sandbox")
			}
		}
		inUse := netnsInUse()
		for name := range netnsEntries(t) {
			if strings.HasPrefix(name, "cni-") && !netnsBefore[name] && !netnsLive[name] && !inUse[netnsInode(filepath.Join(netnsDir, name))] {
				problems = append(problems, "netns "+name+" of no live sandbox and no process")
			}
		}
		return len(problems) == 0
	}, func() string { return strings.Join(problems, "; ") })
}

// netnsEntries are the names in netnsDir.
func netnsEntries(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(netnsDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	return names
}

// netnsInode is the inode of the network namespace mounted at path (0 if it cannot be read).
func netnsInode(path string) uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

// netnsInUse are the inodes of the network namespaces some process of the host is in.
func netnsInUse() map[uint64]bool {
	in := map[uint64]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		if ino := netnsInode(p); ino != 0 {
			in[ino] = true
		}
	}
	return in
}

// waitFor polls cond every 250 ms until it holds, failing t after timeout with detail's last words.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			var d []string
			for _, f := range detail {
				d = append(d, f())
			}
			t.Fatalf("%s: not within %v %s", what, timeout, strings.Join(d, "; "))
		}
	}
}
