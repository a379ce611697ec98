package containerd

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// capSysResource is CAP_SYS_RESOURCE's bit number (linux/capability.h).
const capSysResource = 24

// HasCapSysResource reports whether this process's effective capability set (CapEff in
// /proc/self/status) holds CAP_SYS_RESOURCE. Without it runc cannot lower a container's oom_score_adj
// below the runtime's own, so containerd's CRI plugin needs restrict_oom_score_adj = true.
func HasCapSysResource() (bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false, err
	}
	defer f.Close()
	return capEffHas(f, capSysResource)
}

// capEffHas scans a /proc/<pid>/status stream for the CapEff line (hex mask) and tests bit.
func capEffHas(r interface{ Read([]byte) (int, error) }, bit uint) (bool, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return false, fmt.Errorf("CapEff %q: %w", strings.TrimSpace(v), err)
		}
		return mask&(1<<bit) != 0, nil
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("no CapEff line in /proc/self/status")
}

// DetectCgroupDriver picks the cgroup driver containerd's runc runtime should use, the way k3s does:
// "systemd" when the host runs the unified cgroup v2 hierarchy under systemd (/run/systemd/system
// exists, sd_booted(3)), "cgroupfs" otherwise (always on cgroup v1 hosts and hosts without systemd).
func DetectCgroupDriver() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		return "cgroupfs"
	}
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		return "systemd"
	}
	return "cgroupfs"
}
