#!/bin/sh
# Leak check at scale: 200 create → Running → delete cycles of a pod with tmpfs, emptyDir and configMap
# volumes through nodekit's kubelet (real containerd, real API server), then a check that no sandbox,
# container, network namespace, IP allocation, mount, pod cgroup, pod directory or log directory is
# left. Prints the time per cycle. Usage: bench/kubelet/cycles.sh [cycles]   (default 200; needs root)
set -eu
cd "$(dirname "$0")/../.."
cycles="${1:-200}"
NODEKIT_KUBELET_CYCLES="$cycles" go test -count=1 -timeout 90m -run '^TestCreateDeleteCyclesLeaveNothing$' -v ./kubelet/ 2>&1 |
	grep -E 'create/delete cycles|left|^(--- |ok|FAIL|PASS)'
