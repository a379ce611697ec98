#!/usr/bin/env bash
# Runs every nodekit benchmark and prints its figures, next to the upstream peer where the benchmark has
# one (crictl v1.37.0; Debian's reference CNI plugins). Needs root, the installed dependencies and the
# built binaries (`make bench` does both). Each benchmark is bounded; the whole run takes a few minutes.
# Pick some with BENCH="crictl cni" bench/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
BENCH=${BENCH:-"runtime crictl cni apiserver kubelet probes scheduler proxy"}

run() { echo; echo "=== $1"; shift; "$@"; }
for b in $BENCH; do
	case $b in
	runtime) run "runtime: pod start and containerd start (sandbox+container until /healthz)" \
		go test -run '^$' -bench . -benchtime 5x ./test/e2e/runtime/ ;;
	crictl) run "crictl: nodekit crictl vs upstream crictl v1.37.0 (ps, pods, images)" bench/crictl/run.sh ;;
	cni) run "cni: ADD+DEL latency, nodekit-cni vs Debian bridge+host-local" \
		go run ./bench/cni -n 50 -nodekit-bin "$PWD/bin/nodekit" ;;
	apiserver) run "apiserver: create→watch latency, list of 10k pods, server RSS" \
		go run ./bench/apiserver -pods 10000 ;;
	kubelet) run "kubelet: pod start latency to Ready (1 and 30 pods, token volume + readiness probe) vs the raw-CRI floor; agent RSS and heap at 0, 30, 110 pods" \
		go test -run '^$' -bench . -benchtime 1x -timeout 30m ./bench/kubelet/ ;;
	probes) run "probes: CPU and memory of the probe manager, 100 pods x 3 probes at 1 s" \
		go test -run '^$' -bench . -benchtime 1x ./bench/probes/ ;;
	scheduler) run "scheduler: throughput, 1000 pods over 100 nodes" \
		go test -run '^$' -bench . -benchtime 1x ./bench/scheduler/ ;;
	proxy)
		run "proxy: full sync and one-change time, 1000 and 10000 Services x 3 endpoints" \
			go run ./bench/proxy -services 1000,10000
		# Side by side with upstream kube-proxy (iptables mode) when a binary is given (built outside the
		# repo, see docs/proxy.md); NODEKIT_BENCH_SERVICES picks the size (default 1000).
		if [ -n "${NODEKIT_UPSTREAM_KUBE_PROXY:-}" ]; then
			run "proxy: nodekit vs kube-proxy, same API server" \
				go test -run TestCompareUpstream -v -timeout 60m ./bench/proxy/
		fi
		;;
	*) echo "bench/run.sh: unknown benchmark $b" >&2; exit 2 ;;
	esac
done
