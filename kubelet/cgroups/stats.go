package cgroups

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stats are a cgroup's cumulative CPU time and current memory use, as cadvisor reports them for
// /stats/summary.
type Stats struct {
	// CPUUsageNanos is the CPU time of every task in the cgroup, ns (v1 cpuacct.usage; v2 cpu.stat
	// usage_usec × 1000).
	CPUUsageNanos uint64
	// MemoryUsage is v1 memory.usage_in_bytes or v2 memory.current, bytes.
	MemoryUsage uint64
	// MemoryWorkingSet is MemoryUsage minus the inactive file cache (v1 memory.stat total_inactive_file,
	// v2 inactive_file), at least 0.
	MemoryWorkingSet uint64
	// MemoryRSS is anonymous memory (v1 total_rss, v2 anon), bytes.
	MemoryRSS uint64
}

// Stats reads the cgroup's CPU and memory usage. Errors name the file.
func (m *Manager) Stats(n Name) (Stats, error) {
	var s Stats
	var err error
	var stat map[string]uint64
	if m.v2 {
		var cpu map[string]uint64
		if cpu, err = readKeyed(m.Dir("", n), "cpu.stat"); err != nil {
			return s, err
		}
		s.CPUUsageNanos = cpu["usage_usec"] * 1000
		if s.MemoryUsage, err = readUint(m.Dir("", n), "memory.current"); err != nil {
			return s, err
		}
		if stat, err = readKeyed(m.Dir("", n), "memory.stat"); err != nil {
			return s, err
		}
		s.MemoryRSS = stat["anon"]
		s.MemoryWorkingSet = workingSet(s.MemoryUsage, stat["inactive_file"])
		return s, nil
	}
	if s.CPUUsageNanos, err = readUint(m.Dir("cpuacct", n), "cpuacct.usage"); err != nil {
		return s, err
	}
	if s.MemoryUsage, err = readUint(m.Dir("memory", n), "memory.usage_in_bytes"); err != nil {
		return s, err
	}
	if stat, err = readKeyed(m.Dir("memory", n), "memory.stat"); err != nil {
		return s, err
	}
	s.MemoryRSS = stat["total_rss"]
	s.MemoryWorkingSet = workingSet(s.MemoryUsage, stat["total_inactive_file"])
	return s, nil
}

func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile >= usage {
		return 0
	}
	return usage - inactiveFile
}

// readUint reads a file holding one unsigned number.
func readUint(dir, file string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
	}
	return v, nil
}

// readKeyed reads a flat keyed file ("key value" lines: cpu.stat, memory.stat); unparsable lines are
// skipped.
func readKeyed(dir, file string) (map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
