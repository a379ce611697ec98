package kubelet_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/cni/cnitest"
	"github.com/nodekit/nodekit/cni/ipam"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

// TestIPAMMatchesPodsAfterContainerdKills: on nodekit-cni, containerd is killed with SIGKILL 20 times
// (the supervisor restarts it) while pods are being created and deleted; afterwards, once the kubelet's
// CNI GC has run, nodekit-cni's IPAM store holds exactly one address per live pod, each that pod's
// status.podIP and held by its ready sandbox, and nothing else (no leaked address, none twice).
func TestIPAMMatchesPodsAfterContainerdKills(t *testing.T) {
	binDir, err := cnitest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	n := newNodeWith(t, true, containerd.Options{CNIBinDirs: []string{binDir, "/usr/lib/cni"},
		ConfList: containerd.NodekitConfList(t), RestartBackoff: 100 * time.Millisecond})
	n.cfg.CNIConfDir, n.cfg.CNIBinDir = n.rt.CNIConfDir, binDir // the agent's CNI GC uses nodekit-cni here
	n.start()
	ctx := context.Background()
	kills := 20
	if testing.Short() {
		kills = 5
	}
	// The kubelet runs (its runtime manager asked containerd for its version) once a first pod runs.
	n.create(n.demoPod("first"))
	n.waitPod("first", 120*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
	live := []string{"first"}
	deleted := 0
	start := time.Now()
	for i := 0; i < kills; i++ {
		// Churn: a new pod every round, the oldest live one deleted every other round.
		name := fmt.Sprintf("churn-%d", i)
		n.create(n.demoPod(name))
		live = append(live, name)
		if i%2 == 1 {
			n.deleteGracefully(live[0], 0)
			live, deleted = live[1:], deleted+1
		}
		time.Sleep(time.Duration(200+100*(i%5)) * time.Millisecond) // into the sandbox set-up, at varying points
		old := n.rt.Supervisor.PID()
		if old == 0 {
			t.Fatalf("round %d: containerd not running", i)
		}
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		await(t, 60*time.Second, "containerd restarted and answering CRI", func() bool {
			pid := n.rt.Supervisor.PID()
			_, err := n.rt.CRI.Version(ctx)
			return pid != 0 && pid != old && err == nil
		})
	}
	t.Logf("%d SIGKILLs of containerd during %d creations and %d deletions in %v", kills, kills, deleted, time.Since(start).Round(time.Millisecond))
	settled := time.Now()
	podIPs := map[string]string{} // pod → status.podIP
	for _, name := range live {
		p := n.waitPod(name, 180*time.Second, "Running and Ready", func(p *v1.Pod) bool { return running(p) && ready(p) })
		podIPs[name] = p.Status.PodIP
	}
	for i := 0; i < kills; i++ {
		if name := fmt.Sprintf("churn-%d", i); podIPs[name] == "" {
			n.waitGone(name, 120*time.Second)
		}
	}
	t.Logf("live pods Running and Ready, deleted pods gone %v after the last kill", time.Since(settled).Round(time.Millisecond))

	store, err := ipam.Open(filepath.Join(n.rt.Dir, "ipam"), "nk-cri-"+n.rt.Bridge, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What a runtime crash between the plugin's ADD and the sandbox's record leaves (the kills above may
	// or may not have hit that window): an allocation for a sandbox that does not exist. The kubelet's
	// CNI GC must release it too.
	_, subnet, err := net.ParseCIDR(n.rt.Subnet)
	if err != nil {
		t.Fatal(err)
	}
	leaked := net.IPv4(subnet.IP[0], subnet.IP[1], subnet.IP[2], 250).String()
	if err := os.WriteFile(filepath.Join(n.rt.Dir, "ipam", "nk-cri-"+n.rt.Bridge, "ips", leaked), []byte("sandbox-lost-in-a-crash\neth0\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var problems []string
	matches := func() bool {
		problems = nil
		allocs, err := store.List()
		if err != nil {
			t.Fatal(err)
		}
		sandboxes, err := n.rt.CRI.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		owner := map[string]string{} // ready sandbox ID → pod name
		for _, sb := range sandboxes.Items {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				owner[sb.Id] = sb.Metadata.Name
			}
		}
		byIP := map[string]bool{}
		held := map[string]string{} // pod → IP held by its sandbox
		for _, a := range allocs {
			pod, ok := owner[a.ContainerID]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s held by %s, not a ready sandbox", a.IP, a.ContainerID))
				continue
			}
			if byIP[a.IP.String()] || held[pod] != "" {
				problems = append(problems, fmt.Sprintf("%s allocated twice (pod %s)", a.IP, pod))
			}
			byIP[a.IP.String()], held[pod] = true, a.IP.String()
		}
		for pod, ip := range podIPs {
			if held[pod] != ip {
				problems = append(problems, fmt.Sprintf("pod %s: status.podIP %s, IPAM holds %q for its sandbox", pod, ip, held[pod]))
			}
		}
		if len(allocs) != len(podIPs) {
			problems = append(problems, fmt.Sprintf("%d allocations for %d live pods", len(allocs), len(podIPs)))
		}
		return len(problems) == 0
	}
	// The kubelet's CNI GC runs every GCPeriod (5 s here): a leak left by a kill is gone by then.
	for deadline := time.Now().Add(90 * time.Second); !matches(); time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("90s after the pods settled, the IPAM store does not match them: %s", strings.Join(problems, "; "))
		}
	}
	t.Logf("IPAM store matches the %d live pods %v after they settled (the leaked %s released by CNI GC)", len(podIPs), time.Since(settled).Round(time.Millisecond), leaked)
}
