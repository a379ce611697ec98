package kubelet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/kubelet/cgroups"
	"github.com/nodekit/nodekit/test/framework/containerd"
)

// TestCgroupV2PodCgroups runs on a cgroup v2 host (the guests of make vm-test), once per cgroup driver
// (systemd only when systemd is PID 1): the kubelet creates and sizes the pod and QoS cgroups (cpu.weight,
// cpu.max, memory.max of a Guaranteed pod; a BestEffort pod unlimited below besteffort at cpu.weight 1),
// the containers run below their pod's cgroup with their own limits, the pod cgroup's stats (as
// /stats/summary serves them) are read, and deleting the pods removes their cgroups.
func TestCgroupV2PodCgroups(t *testing.T) {
	if !cgroups.IsV2(cgroups.DefaultMount) {
		t.Skip("needs cgroup v2 (run in make vm-test)")
	}
	for _, driver := range []string{cgroups.Cgroupfs, cgroups.Systemd} {
		t.Run(driver, func(t *testing.T) {
			if fi, err := os.Stat("/run/systemd/system"); driver == cgroups.Systemd && (err != nil || !fi.IsDir()) {
				t.Skip("the systemd cgroup driver needs systemd as PID 1 (run in make vm-test)")
			}
			testPodCgroupsV2(t, driver)
		})
	}
}

func testPodCgroupsV2(t *testing.T, driver string) {
	n := newNodeWith(t, true, containerd.Options{CgroupDriver: driver})
	if driver == cgroups.Systemd {
		// One slice of this node's own (nodekit_<name>.slice), stopped at the end with what is left in it.
		n.cfg.Kubelet.CgroupRoot = "nodekit_" + strings.ReplaceAll(n.name, "-", "_") + ".slice"
		cg, err := cgroups.New(cgroups.DefaultMount, driver)
		if err != nil {
			t.Fatal(err)
		}
		root := cgroups.ParseRoot(driver, n.cfg.Kubelet.CgroupRoot)
		t.Cleanup(func() {
			if err := cg.Remove(context.Background(), root); err != nil {
				t.Errorf("stop %s: %v", root.Path(driver), err)
			}
		})
	}
	if got := n.cfg.Kubelet.CgroupDriver; got != driver {
		t.Fatalf("the test's containerd runs runc with %q, want %q", got, driver)
	}
	n.start()
	root := cgroups.ParseRoot(driver, n.cfg.Kubelet.CgroupRoot)
	dir := func(name cgroups.Name) string { return filepath.Join(cgroups.DefaultMount, name.Path(driver)) }
	read := func(d, file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(d, file))
		if err != nil {
			t.Fatalf("read cgroup file: %v", err)
		}
		return strings.TrimSpace(string(b))
	}

	g := n.demoPod("guaranteed")
	g.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	be := n.demoPod("besteffort")
	n.create(g)
	n.create(be)
	gp := n.waitPod(g.Name, 90*time.Second, "Running", running)
	bp := n.waitPod(be.Name, 90*time.Second, "Running", running)
	gdir := dir(cgroups.Pod(root, gp.UID, v1.PodQOSGuaranteed))
	bdir := dir(cgroups.Pod(root, bp.UID, v1.PodQOSBestEffort))
	for _, c := range []struct{ dir, file, want string }{
		{gdir, "cpu.weight", "20"}, // 512 shares (500m), upstream's conversion
		{gdir, "cpu.max", "50000 100000"},
		{gdir, "memory.max", "67108864"},
		{bdir, "cpu.weight", "1"},
		{bdir, "cpu.max", "max 100000"},
		{bdir, "memory.max", "max"},
		{filepath.Dir(bdir), "cpu.weight", "1"}, // besteffort QoS cgroup: 2 shares
	} {
		if got := read(c.dir, c.file); got != c.want {
			t.Errorf("%s/%s = %q, want %q", c.dir, c.file, got, c.want)
		}
	}
	// The container's own cgroup is below the pod's (cgroupfs: <id>; systemd: cri-containerd-<id>.scope).
	id := criID(containerStatus(gp, "demo").ContainerID)
	ctr, _ := filepath.Glob(filepath.Join(gdir, "*"+id+"*"))
	if len(ctr) != 1 {
		t.Fatalf("container %s cgroup below %s: %v", id, gdir, ctr)
	}
	if got := read(ctr[0], "memory.max"); got != "67108864" {
		t.Errorf("container memory.max = %q, want 67108864", got)
	}
	if procs := read(ctr[0], "cgroup.procs"); procs == "" {
		t.Errorf("container cgroup %s has no process", ctr[0])
	}
	s, ok := n.kl.PodCgroupStats(gp.UID)
	current := read(gdir, "memory.current")
	if !ok || s.CPUUsageNanos == 0 || s.MemoryUsage == 0 || s.MemoryWorkingSet == 0 || s.MemoryWorkingSet > s.MemoryUsage {
		t.Errorf("PodCgroupStats = %+v, %v (memory.current %s); want CPU time, usage and working set", s, ok, current)
	}

	for _, p := range []*v1.Pod{gp, bp} {
		n.deleteGracefully(p.Name, 1)
	}
	for _, p := range []*v1.Pod{gp, bp} {
		n.waitGone(p.Name, 60*time.Second)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, d := range []string{gdir, bdir} {
		for {
			_, err := os.Stat(d)
			if os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod cgroup %s left after the pod was deleted (%v)", d, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
