package server

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// statsSummary serves /stats/summary: the node's CPU, memory and root filesystem, the runtime's image
// filesystem (CRI ImageFsInfo), and per pod the running containers' CPU, memory and writable layer from
// CRI ListContainerStats, grouped by sandbox; pod CPU and memory are the sums over its containers.
// Pods are those with a ready CRI sandbox.
func (s *Server) statsSummary(w http.ResponseWriter, r *http.Request) {
	sum, err := s.summary(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, sum)
}

func (s *Server) summary(ctx context.Context) (*statsapi.Summary, error) {
	now := metav1.Now()
	sum := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: s.cfg.NodeName, StartTime: metav1.NewTime(bootTime())}}
	sum.Node.CPU = nodeCPU(now)
	sum.Node.Memory = nodeMemory(now)
	if s.cfg.RootDir != "" {
		sum.Node.Fs = statfs(s.cfg.RootDir, now)
	}
	if s.cfg.Images != nil {
		if fsi, err := s.cfg.Images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{}); err == nil && len(fsi.GetImageFilesystems()) > 0 {
			u := fsi.GetImageFilesystems()[0]
			fs := statfs(u.GetFsId().GetMountpoint(), now)
			if fs == nil {
				fs = &statsapi.FsStats{Time: now}
			}
			fs.UsedBytes = ptr(u.GetUsedBytes().GetValue())
			if u.GetInodesUsed() != nil {
				fs.InodesUsed = ptr(u.GetInodesUsed().GetValue())
			}
			sum.Node.Runtime = &statsapi.RuntimeStats{ImageFs: fs}
		}
	}

	sbs, err := s.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	ctrs, err := s.cfg.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	cstats, err := s.cfg.Runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainerStats: %w", err)
	}
	created := map[string]int64{}
	sandboxOf := map[string]string{} // running container ID -> sandbox ID
	for _, c := range ctrs.GetContainers() {
		created[c.GetId()] = c.GetCreatedAt()
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			sandboxOf[c.GetId()] = c.GetPodSandboxId()
		}
	}
	bySandbox := map[string][]*runtimeapi.ContainerStats{}
	for _, cs := range cstats.GetStats() {
		if sb, ok := sandboxOf[cs.GetAttributes().GetId()]; ok {
			bySandbox[sb] = append(bySandbox[sb], cs)
		}
	}
	for _, sb := range sbs.GetItems() {
		l := sb.GetLabels()
		uid := l[labelPodUID]
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: l[labelPodName], Namespace: l[labelPodNamespace], UID: uid},
			StartTime:  metav1.NewTime(time.Unix(0, sb.GetCreatedAt())),
			Containers: []statsapi.ContainerStats{},
		}
		if ps.PodRef.Name == "" {
			ps.PodRef.Name, ps.PodRef.Namespace = sb.GetMetadata().GetName(), sb.GetMetadata().GetNamespace()
		}
		var cpuNano, cpuCore, wss, usage, rss uint64
		for _, cs := range bySandbox[sb.GetId()] {
			c := containerStats(cs, created[cs.GetAttributes().GetId()])
			ps.Containers = append(ps.Containers, c)
			if c.CPU != nil {
				cpuNano += deref(c.CPU.UsageNanoCores)
				cpuCore += deref(c.CPU.UsageCoreNanoSeconds)
			}
			if c.Memory != nil {
				wss += deref(c.Memory.WorkingSetBytes)
				usage += deref(c.Memory.UsageBytes)
				rss += deref(c.Memory.RSSBytes)
			}
		}
		ps.CPU = &statsapi.CPUStats{Time: now, UsageNanoCores: ptr(cpuNano), UsageCoreNanoSeconds: ptr(cpuCore)}
		ps.Memory = &statsapi.MemoryStats{Time: now, WorkingSetBytes: ptr(wss), UsageBytes: ptr(usage), RSSBytes: ptr(rss)}
		if s.cfg.PodCgroupStats != nil {
			if cs, ok := s.cfg.PodCgroupStats(types.UID(uid)); ok {
				ps.CPU.UsageCoreNanoSeconds = ptr(cs.CPUUsageNanos)
				ps.Memory = &statsapi.MemoryStats{Time: now, WorkingSetBytes: ptr(cs.MemoryWorkingSet),
					UsageBytes: ptr(cs.MemoryUsage), RSSBytes: ptr(cs.MemoryRSS)}
			}
		}
		sum.Pods = append(sum.Pods, ps)
	}
	if sum.Pods == nil {
		sum.Pods = []statsapi.PodStats{}
	}
	return sum, nil
}

// containerStats converts one CRI ContainerStats (CPU, memory, writable layer) to the summary type.
func containerStats(cs *runtimeapi.ContainerStats, createdAt int64) statsapi.ContainerStats {
	out := statsapi.ContainerStats{Name: cs.GetAttributes().GetMetadata().GetName(), StartTime: metav1.NewTime(time.Unix(0, createdAt))}
	if cpu := cs.GetCpu(); cpu != nil {
		out.CPU = &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, cpu.GetTimestamp()))}
		if cpu.GetUsageCoreNanoSeconds() != nil {
			out.CPU.UsageCoreNanoSeconds = ptr(cpu.GetUsageCoreNanoSeconds().GetValue())
		}
		if cpu.GetUsageNanoCores() != nil {
			out.CPU.UsageNanoCores = ptr(cpu.GetUsageNanoCores().GetValue())
		}
	}
	if m := cs.GetMemory(); m != nil {
		out.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.GetTimestamp()))}
		for dst, src := range map[**uint64]*runtimeapi.UInt64Value{
			&out.Memory.WorkingSetBytes: m.GetWorkingSetBytes(), &out.Memory.UsageBytes: m.GetUsageBytes(),
			&out.Memory.RSSBytes: m.GetRssBytes(), &out.Memory.AvailableBytes: m.GetAvailableBytes(),
			&out.Memory.PageFaults: m.GetPageFaults(), &out.Memory.MajorPageFaults: m.GetMajorPageFaults(),
		} {
			if src != nil {
				*dst = ptr(src.GetValue())
			}
		}
	}
	if wl := cs.GetWritableLayer(); wl != nil {
		out.Rootfs = &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, wl.GetTimestamp()))}
		if wl.GetUsedBytes() != nil {
			out.Rootfs.UsedBytes = ptr(wl.GetUsedBytes().GetValue())
		}
		if wl.GetInodesUsed() != nil {
			out.Rootfs.InodesUsed = ptr(wl.GetInodesUsed().GetValue())
		}
	}
	return out
}

// nodeCPU reads cumulative non-idle CPU time from /proc/stat (USER_HZ = 100 on Linux).
func nodeCPU(now metav1.Time) *statsapi.CPUStats {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return nil
	}
	var busy uint64
	for i, v := range fields[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		busy += n
	}
	return &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: ptr(busy * 1e7)}
}

// nodeMemory reads /proc/meminfo: working set = MemTotal - MemAvailable.
func nodeMemory(now metav1.Time) *statsapi.MemoryStats {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil
	}
	kv := map[string]uint64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			kv[strings.TrimSuffix(f[0], ":")] = n * 1024
		}
	}
	total, avail := kv["MemTotal"], kv["MemAvailable"]
	return &statsapi.MemoryStats{Time: now, AvailableBytes: ptr(avail), UsageBytes: ptr(total - kv["MemFree"]), WorkingSetBytes: ptr(total - avail)}
}

// statfs returns capacity, available and used bytes and inodes of the filesystem holding path.
func statfs(path string, now metav1.Time) *statsapi.FsStats {
	var st unix.Statfs_t
	if path == "" || unix.Statfs(path, &st) != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	return &statsapi.FsStats{Time: now,
		CapacityBytes: ptr(st.Blocks * bs), AvailableBytes: ptr(st.Bavail * bs), UsedBytes: ptr((st.Blocks - st.Bfree) * bs),
		Inodes: ptr(st.Files), InodesFree: ptr(st.Ffree), InodesUsed: ptr(st.Files - st.Ffree)}
}

// bootTime is the host's boot time from sysinfo's uptime.
func bootTime() time.Time {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(si.Uptime) * time.Second).Truncate(time.Second)
}

func ptr[T any](v T) *T { return &v }

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
