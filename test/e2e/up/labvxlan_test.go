package up

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/cluster"
	"github.com/nodekit/nodekit/cni/vxlan"
	"github.com/nodekit/nodekit/podroutes"
)

// TestLabVXLAN runs `nodekit lab up --nodes 2 --network-backend vxlan`: each agent makes the VXLAN device
// nodekit.1 (VNI 1, port 8472, MTU the lab link's minus 50, the first address of its podCIDR) and
// publishes its VTEP on its Node (flannel's annotations); a pod on each node pings the other across the
// tunnel, through the route, neighbour and forwarding entries the agents installed; once n2's Node is
// deleted (its agent frozen, so that it does not register again), n1 holds none of the three for it any
// more; `lab down` leaves nothing behind.
func TestLabVXLAN(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nodekit lab needs root (netns, bridge, containerd)")
	}
	start := time.Now()
	l := startLab(t, "nkh7", 2, 0, "--network-backend", podroutes.BackendVXLAN, "--prefix", "nkh7", "--subnet", "172.30.77.0/24",
		"--cluster-cidr", "10.177.0.0/16", "--etcd-listen-client", "127.0.0.1:23817")
	t.Logf("lab up in %v", time.Since(start).Round(time.Second))
	st, err := cluster.ReadLabState(l.dataDir)
	if err != nil || len(st.Nodes) != 2 {
		t.Fatalf("lab state: %v %+v", err, st)
	}
	var frozen int
	l.beforeDown = append(l.beforeDown, func() {
		if frozen != 0 {
			_ = syscall.Kill(frozen, syscall.SIGCONT)
		}
	})
	e := &env{dataDir: filepath.Join(l.dataDir, "server")}
	client := e.client(t)
	ctx := context.Background()
	n1, n2 := st.Nodes[0], st.Nodes[1]
	in := func(n cluster.LabNode, argv ...string) string {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", n.Netns}, argv...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %v\n%s", n.Name, argv, err, out)
		}
		return string(out)
	}

	// The device, and n2's VTEP on its Node.
	dev := vxlan.DeviceName(vxlan.DefaultVNI)
	node2, err := client.CoreV1().Nodes().Get(ctx, n2.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var data podroutes.BackendData
	if err := json.Unmarshal([]byte(node2.Annotations[podroutes.AnnotationBackendData]), &data); err != nil ||
		node2.Annotations[podroutes.AnnotationBackendType] != "vxlan" || node2.Annotations[podroutes.AnnotationPublicIP] != n2.IP || data.VNI != 1 {
		t.Fatalf("%s's VTEP annotations %v: %v", n2.Name, node2.Annotations, err)
	}
	cidr2 := node2.Spec.PodCIDR
	vtep2 := strings.TrimSuffix(cidr2, ".0/24") + ".0"
	link := in(n2, "ip", "-d", "addr", "show", "dev", dev)
	for _, want := range []string{"mtu 1450 ", "link/ether " + data.VtepMAC, "vxlan id 1 local " + n2.IP + " dev eth0 ", "dstport 8472 ", "nolearning", "inet " + vtep2 + "/32"} {
		if !strings.Contains(link, want) {
			t.Errorf("%s's %s: no %q in\n%s", n2.Name, dev, want, link)
		}
	}

	// A pod on each node pings the other across the tunnel.
	ips := e.runPinned(t, client, map[string]string{"vx-a": n1.Name, "vx-b": n2.Name})
	for _, p := range []struct {
		from       cluster.LabNode
		pod, other string
	}{{n1, "vx-a", "vx-b"}, {n2, "vx-b", "vx-a"}} {
		pid := podPID(t, p.from, p.pod)
		var out []byte
		for i := 0; i < 10; i++ {
			if out, err = exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "--", "ping", "-c", "3", "-i", "0.2", "-w", "10", ips[p.other]).CombinedOutput(); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		// ttl 62: routed by the two nodes only, not through the host (which routes host-gw over the bridge)
		if err != nil || !strings.Contains(string(out), " 0% packet loss") || !strings.Contains(string(out), "ttl=62") {
			t.Fatalf("pod %s → pod %s %s: %v\n%s", p.pod, p.other, ips[p.other], err, out)
		}
		t.Logf("pod %s on %s pinged pod %s (%s): %s", p.pod, p.from.Name, p.other, ips[p.other], lastLine(string(out)))
	}
	// ... through n1's route, neighbour and forwarding entries for n2.
	want := []string{cidr2 + " via " + vtep2 + " dev " + dev + " proto 78 onlink", vtep2 + " lladdr " + data.VtepMAC + " PERMANENT",
		data.VtepMAC + " dst " + n2.IP + " self permanent"}
	got := func() []string {
		return []string{in(n1, "ip", "route", "show", cidr2), in(n1, "ip", "neigh", "show", "dev", dev), in(n1, "bridge", "fdb", "show", "dev", dev)}
	}
	for i, g := range got() {
		if !strings.Contains(g, want[i]) {
			t.Errorf("%s: want %q in %q", n1.Name, want[i], g)
		}
	}

	// n2's Node deleted: n1's three entries for it go. Its agent is frozen first, or it would register
	// the Node again.
	b, err := os.ReadFile(cluster.LayoutOf(l.dataDir).PIDFile(n2.Name + "-agent"))
	if err != nil {
		t.Fatal(err)
	}
	frozen, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(frozen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := client.CoreV1().Nodes().Delete(ctx, n2.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, client, time.Minute, n1.Name+" without route, neighbour and forwarding entry for "+n2.Name, func() (bool, string) {
		g := got()
		for i := range g {
			if strings.Contains(g[i], strings.Fields(want[i])[0]) {
				return false, strings.Join(g, " | ")
			}
		}
		return true, ""
	})
	t.Logf("%s's entries for %s gone %v after its Node was deleted", n1.Name, n2.Name, time.Since(deleted).Round(time.Millisecond))
	_ = syscall.Kill(frozen, syscall.SIGCONT)
	frozen = 0
	l.downAndAssertGone(st)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
