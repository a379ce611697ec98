package cgroups

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNamePaths(t *testing.T) {
	for _, tc := range []struct {
		driver, root string
		class        v1.PodQOSClass
		want         string
	}{
		{Cgroupfs, "/", v1.PodQOSGuaranteed, "/kubepods/pod1a-2b"},
		{Cgroupfs, "", v1.PodQOSBurstable, "/kubepods/burstable/pod1a-2b"},
		{Cgroupfs, "/nodekit/n1", v1.PodQOSBestEffort, "/nodekit/n1/kubepods/besteffort/pod1a-2b"},
		{Systemd, "/", v1.PodQOSGuaranteed, "/kubepods.slice/kubepods-pod1a_2b.slice"},
		{Systemd, "/", v1.PodQOSBurstable, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a_2b.slice"},
		{Systemd, "/nodekit.slice/nodekit-n_1.slice", v1.PodQOSBestEffort,
			"/nodekit.slice/nodekit-n_1.slice/nodekit-n_1-kubepods.slice/nodekit-n_1-kubepods-besteffort.slice/nodekit-n_1-kubepods-besteffort-pod1a_2b.slice"},
	} {
		if got := Pod(ParseRoot(tc.driver, tc.root), "1a-2b", tc.class).Path(tc.driver); got != tc.want {
			t.Errorf("%s root %q %s: %q, want %q", tc.driver, tc.root, tc.class, got, tc.want)
		}
	}
	if got := ParseRoot(Systemd, "nodekit-n_1.slice"); strings.Join(got, ",") != "nodekit,n-1" {
		t.Errorf("ParseRoot(systemd, nodekit-n_1.slice) = %q", got)
	}
	if got := (Name{}).unit(); got != "-.slice" {
		t.Errorf("root unit %q", got)
	}
}

func TestConversions(t *testing.T) {
	for shares, weight := range map[uint64]uint64{0: 1, 2: 1, 1024: 39, 262144: 10000, 1 << 20: 10000, 102: 4} {
		if got := SharesToWeight(shares); got != weight {
			t.Errorf("SharesToWeight(%d) = %d, want %d", shares, got, weight)
		}
	}
	if got := MilliCPUToShares(0); got != 2 {
		t.Errorf("MilliCPUToShares(0) = %d", got)
	}
	if got := MilliCPUToShares(250); got != 256 {
		t.Errorf("MilliCPUToShares(250) = %d", got)
	}
	if got := MilliCPUToQuota(1, QuotaPeriod); got != MinQuotaUs {
		t.Errorf("MilliCPUToQuota(1) = %d", got)
	}
	if got := MilliCPUToQuota(1500, QuotaPeriod); got != 150000 {
		t.Errorf("MilliCPUToQuota(1500) = %d", got)
	}
}

func pod(ctrs ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	for _, r := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Resources: r})
	}
	return p
}

func rl(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

func TestForPod(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pod           *v1.Pod
		shares        uint64
		quota, memory int64
	}{
		{"guaranteed sums", pod(v1.ResourceRequirements{Limits: rl("500m", "64Mi")}, v1.ResourceRequirements{Limits: rl("250m", "32Mi")}), 768, 75000, 96 << 20},
		{"one container without limits", pod(v1.ResourceRequirements{Limits: rl("500m", "64Mi")}, v1.ResourceRequirements{Requests: rl("100m", "")}), 614, Unlimited, Unlimited},
		{"best effort", pod(v1.ResourceRequirements{}), 2, Unlimited, Unlimited},
	} {
		r := ForPod(tc.pod)
		if *r.CPUShares != tc.shares || *r.CPUQuota != tc.quota || *r.Memory != tc.memory || *r.CPUPeriod != QuotaPeriod || r.Pids != nil {
			t.Errorf("%s: shares %d quota %d memory %d period %d pids %v; want %d %d %d", tc.name, *r.CPUShares, *r.CPUQuota, *r.Memory, *r.CPUPeriod, r.Pids, tc.shares, tc.quota, tc.memory)
		}
	}
}

func write(t *testing.T, dir, file, v string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// TestEnsureV2 writes a pod cgroup into a fake cgroup v2 tree: controllers enabled on the way down,
// limits in cpu.weight/cpu.max/memory.max/pids.max, and removed again.
func TestEnsureV2(t *testing.T) {
	mount := t.TempDir()
	write(t, mount, "cgroup.controllers", "cpuset cpu memory pids")
	write(t, mount, "cgroup.subtree_control", "cpuset cpu memory")
	kp := filepath.Join(mount, "kubepods")
	write(t, kp, "cgroup.controllers", "cpu memory pids")
	write(t, kp, "cgroup.subtree_control", "cpu memory pids")
	write(t, filepath.Join(kp, "burstable"), "cgroup.controllers", "memory")
	write(t, filepath.Join(kp, "burstable"), "cgroup.subtree_control", "")
	m, err := New(mount, Cgroupfs)
	if err != nil || !m.V2() {
		t.Fatalf("New: %v, v2 %v", err, m.V2())
	}
	n := Pod(nil, "u1", v1.PodQOSBurstable)
	r := Resources{CPUShares: ptr[uint64](1024), CPUQuota: ptr[int64](50000), Memory: ptr[int64](64 << 20), Pids: ptr[int64](Unlimited)}
	if err := m.Ensure(context.Background(), n, r); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(kp, "burstable", "podu1")
	for file, want := range map[string]string{"cpu.weight": "39", "cpu.max": "50000 100000", "memory.max": "67108864", "pids.max": "max"} {
		if got := read(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	// Only the missing controller is enabled at the root; kubepods needed none; burstable got +memory.
	if got := read(t, filepath.Join(mount, "cgroup.subtree_control")); got != "+pids" {
		t.Errorf("root subtree_control %q, want +pids written", got)
	}
	if got := read(t, filepath.Join(kp, "cgroup.subtree_control")); got != "cpu memory pids" {
		t.Errorf("kubepods subtree_control %q rewritten", got)
	}
	if got := read(t, filepath.Join(kp, "burstable", "cgroup.subtree_control")); got != "+memory" {
		t.Errorf("burstable subtree_control %q, want +memory", got)
	}
	if err := m.Ensure(context.Background(), n, Resources{CPUQuota: ptr(Unlimited), Memory: ptr(Unlimited)}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "cpu.max")); got != "max 100000" {
		t.Errorf("unlimited cpu.max = %q", got)
	}
	if err := m.Remove(context.Background(), n); err == nil {
		t.Errorf("Remove of a non-empty directory succeeded") // the fake tree holds files; a kernel's does not
	}
	for _, f := range []string{"cpu.weight", "cpu.max", "memory.max", "pids.max"} {
		os.Remove(filepath.Join(dir, f))
	}
	if err := m.Remove(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if m.Exists(n) {
		t.Errorf("%s still exists", dir)
	}
	if err := m.Remove(context.Background(), n); err != nil {
		t.Errorf("Remove of a removed cgroup: %v", err)
	}
}

// TestEnsureV1 writes a pod cgroup into a fake cgroup v1 tree (one directory per controller) under the
// cgroupfs driver and removes it from every hierarchy, including one runc created it in.
func TestEnsureV1(t *testing.T) {
	mount := t.TempDir()
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "freezer"} {
		write(t, filepath.Join(mount, c), "cgroup.procs", "")
	}
	m, err := New(mount, Cgroupfs)
	if err != nil || m.V2() {
		t.Fatalf("New: %v, v2 %v", err, m.V2())
	}
	root := ParseRoot(Cgroupfs, "/nk")
	n := Pod(root, "u1", v1.PodQOSGuaranteed)
	r := Resources{CPUShares: ptr[uint64](512), CPUQuota: ptr[int64](50000), Memory: ptr(Unlimited), Pids: ptr[int64](100)}
	if err := m.Ensure(context.Background(), n, r); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"cpu/nk/kubepods/podu1/cpu.shares": "512", "cpu/nk/kubepods/podu1/cpu.cfs_quota_us": "50000",
		"cpu/nk/kubepods/podu1/cpu.cfs_period_us": "100000", "memory/nk/kubepods/podu1/memory.limit_in_bytes": "-1",
		"pids/nk/kubepods/podu1/pids.max": "100",
	} {
		if got := read(t, filepath.Join(mount, path)); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(mount, "cpuacct/nk/kubepods/podu1")); err != nil {
		t.Errorf("no cpuacct pod cgroup: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(mount, "freezer/nk/kubepods/podu1"), 0o755); err != nil { // as runc does
		t.Fatal(err)
	}
	for _, f := range []string{"cpu/nk/kubepods/podu1/cpu.shares", "cpu/nk/kubepods/podu1/cpu.cfs_quota_us", "cpu/nk/kubepods/podu1/cpu.cfs_period_us", "memory/nk/kubepods/podu1/memory.limit_in_bytes", "pids/nk/kubepods/podu1/pids.max"} {
		os.Remove(filepath.Join(mount, f))
	}
	if err := m.Remove(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "freezer"} {
		if _, err := os.Stat(filepath.Join(mount, c, "nk/kubepods/podu1")); !os.IsNotExist(err) {
			t.Errorf("%s pod cgroup left: %v", c, err)
		}
	}
}

// TestStats reads usage from fake v1 and v2 trees, with both drivers' paths.
func TestStats(t *testing.T) {
	v2 := t.TempDir()
	write(t, v2, "cgroup.controllers", "cpu memory")
	n := Pod(nil, "u-1", v1.PodQOSBurstable)
	dir := filepath.Join(v2, n.Path(Systemd))
	write(t, dir, "cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")
	write(t, dir, "memory.current", "10485760\n")
	write(t, dir, "memory.stat", "anon 4096\nfile 8192\ninactive_file 1048576\nactive_file 4096\n")
	m, _ := New(v2, Systemd)
	s, err := m.Stats(n)
	if err != nil {
		t.Fatal(err)
	}
	if (s != Stats{CPUUsageNanos: 1500000, MemoryUsage: 10485760, MemoryWorkingSet: 9437184, MemoryRSS: 4096}) {
		t.Errorf("v2 stats %+v", s)
	}
	v1m := t.TempDir()
	write(t, filepath.Join(v1m, "cpuacct", n.Path(Cgroupfs)), "cpuacct.usage", "123456789\n")
	mem := filepath.Join(v1m, "memory", n.Path(Cgroupfs))
	write(t, mem, "memory.usage_in_bytes", "2048\n")
	write(t, mem, "memory.stat", "cache 0\nrss 10\ntotal_rss 1024\ntotal_inactive_file 4096\n")
	m, _ = New(v1m, Cgroupfs)
	if s, err = m.Stats(n); err != nil {
		t.Fatal(err)
	}
	if (s != Stats{CPUUsageNanos: 123456789, MemoryUsage: 2048, MemoryWorkingSet: 0, MemoryRSS: 1024}) {
		t.Errorf("v1 stats %+v", s)
	}
	if _, err := m.Stats(Pod(nil, "other", v1.PodQOSBurstable)); err == nil {
		t.Errorf("stats of a missing cgroup: no error")
	}
}

func TestSystemdProperties(t *testing.T) {
	r := Resources{CPUShares: ptr[uint64](1024), CPUQuota: ptr[int64](25000), Memory: ptr[int64](1 << 20), Pids: ptr(Unlimited)}
	got := map[string]string{}
	for _, p := range systemdProperties(true, r) {
		got[p.Name] = p.Value.String()
	}
	want := map[string]string{"CPUAccounting": "true", "CPUWeight": "@t 39", "CPUQuotaPerSecUSec": "@t 250000",
		"CPUQuotaPeriodUSec": "@t 100000", "MemoryAccounting": "true", "MemoryMax": "@t 1048576",
		"TasksAccounting": "true", "TasksMax": "@t 18446744073709551615"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("v2 %s = %q, want %q", k, got[k], v)
		}
	}
	got = map[string]string{}
	for _, p := range systemdProperties(false, Resources{CPUShares: ptr[uint64](2), CPUQuota: ptr[int64](1234), Memory: ptr(Unlimited)}) {
		got[p.Name] = p.Value.String()
	}
	for k, v := range map[string]string{"CPUShares": "@t 2", "CPUQuotaPerSecUSec": "@t 20000", "MemoryLimit": "@t 18446744073709551615"} {
		if got[k] != v {
			t.Errorf("v1 %s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := New(t.TempDir(), "cgroup"); err == nil || !strings.Contains(err.Error(), `"cgroup" is not cgroupfs or systemd`) {
		t.Errorf("New with a bad driver: %v", err)
	}
}
