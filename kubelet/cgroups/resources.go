package cgroups

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/podspec"
)

// CPU constants as upstream's kubelet uses them (pkg/kubelet/cm/helpers_linux.go).
const (
	MinShares     = 2
	MaxShares     = 262144
	SharesPerCPU  = 1024
	QuotaPeriod   = 100000 // CFS period, 100 ms in µs
	MinQuotaUs    = 1000   // the smallest CFS quota, 1 ms in µs
	milliCPUToCPU = 1000
)

// MilliCPUToShares converts a cpu request in millicores to cpu.shares (1 cpu = 1024), clamped to
// [MinShares, MaxShares]; 0 gives MinShares.
func MilliCPUToShares(milli int64) uint64 {
	s := milli * SharesPerCPU / milliCPUToCPU
	switch {
	case s < MinShares:
		return MinShares
	case s > MaxShares:
		return MaxShares
	}
	return uint64(s)
}

// MilliCPUToQuota converts a cpu limit in millicores to a CFS quota in µs for period (µs), at least
// MinQuotaUs; 0 gives 0 (no limit).
func MilliCPUToQuota(milli, period int64) int64 {
	if milli == 0 {
		return 0
	}
	q := milli * period / milliCPUToCPU
	if q < MinQuotaUs {
		return MinQuotaUs
	}
	return q
}

// SharesToWeight converts cgroup v1 cpu.shares [2, 262144] to cgroup v2 cpu.weight [1, 10000] as
// upstream's kubelet does (CpuSharesToCpuWeight): 1 + (shares-2)*9999/262142, shares clamped first.
func SharesToWeight(shares uint64) uint64 {
	shares = min(max(shares, MinShares), MaxShares)
	return 1 + (shares-MinShares)*9999/(MaxShares-MinShares)
}

// Resources are the limits of one cgroup. A nil field is left as it is; Unlimited removes a limit.
type Resources struct {
	// CPUShares is cpu.shares (v1) or, converted by SharesToWeight, cpu.weight (v2).
	CPUShares *uint64
	// CPUQuota is the CFS quota in µs per CPUPeriod (cpu.cfs_quota_us/cpu.cfs_period_us on v1, cpu.max
	// on v2); Unlimited for none. CPUPeriod defaults to QuotaPeriod when CPUQuota is set.
	CPUQuota  *int64
	CPUPeriod *uint64
	// Memory is the memory limit in bytes (memory.limit_in_bytes on v1, memory.max on v2), or Unlimited.
	Memory *int64
	// Pids is the process limit (pids.max), or Unlimited.
	Pids *int64
}

// Unlimited as a limit in Resources means no limit ("-1" on v1, "max" on v2).
const Unlimited int64 = -1

// ForPod returns the pod cgroup's limits as upstream's ResourceConfigForPod computes them from
// podspec.PodResources: cpu shares from the cpu request (MinShares without one), a CFS quota when a
// cpu limit applies to the whole pod, a memory limit when a memory limit does; otherwise unlimited.
// Pod overhead and pids (podPidsLimit is not supported) are not included.
func ForPod(pod *v1.Pod) Resources {
	req, lim := podspec.PodResources(pod)
	shares := MilliCPUToShares(req.Cpu().MilliValue())
	quota, period, mem := Unlimited, uint64(QuotaPeriod), Unlimited
	if q, ok := lim[v1.ResourceCPU]; ok {
		quota = MilliCPUToQuota(q.MilliValue(), QuotaPeriod)
	}
	if m, ok := lim[v1.ResourceMemory]; ok {
		mem = m.Value()
	}
	return Resources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem}
}

// ForBestEffort is the besteffort QoS cgroup's limits: MinShares, as upstream's QoS manager sets.
func ForBestEffort() Resources {
	s := uint64(MinShares)
	return Resources{CPUShares: &s}
}
