package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podspec"
	"github.com/nodekit/nodekit/kubelet/cgroups"
)

// linuxResources maps a container's requests and limits to CRI LinuxContainerResources: cpu.shares from
// the cpu request (or the limit when only that is set, as API defaulting does), CFS quota/period from
// the cpu limit, memory limit in bytes, and the OOM score adjustment of the pod's QoS class.
func linuxResources(pod *v1.Pod, c *v1.Container, memCapacity int64) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq, cpuLim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
	req := cpuReq.MilliValue()
	if req == 0 && !cpuLim.IsZero() {
		req = cpuLim.MilliValue()
	}
	r.CpuShares = int64(cgroups.MilliCPUToShares(req))
	if !cpuLim.IsZero() {
		r.CpuQuota = cgroups.MilliCPUToQuota(cpuLim.MilliValue(), cgroups.QuotaPeriod)
		r.CpuPeriod = cgroups.QuotaPeriod
	}
	if m := c.Resources.Limits.Memory(); !m.IsZero() {
		r.MemoryLimitInBytes = m.Value()
	}
	r.OomScoreAdj = oomScoreAdj(pod, c, memCapacity)
	return r
}

// oomScoreAdj follows upstream's QoS policy: Guaranteed -997, BestEffort 1000, Burstable
// 1000 - 1000*memoryRequest/capacity clamped to [2, 999]. A runtime with restrict_oom_score_adj raises
// values below its own to its own.
func oomScoreAdj(pod *v1.Pod, c *v1.Container, memCapacity int64) int64 {
	switch podspec.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return -997
	case v1.PodQOSBestEffort:
		return 1000
	}
	if memCapacity <= 0 {
		return 999
	}
	adj := 1000 - (1000*c.Resources.Requests.Memory().Value())/memCapacity
	if adj < 2 {
		return 2
	}
	if adj > 999 {
		return 999
	}
	return adj
}
