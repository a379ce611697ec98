#!/usr/bin/env bash
# Compares `nodekit crictl` with upstream crictl v1.37.0 (ps, pods, images against the same containerd
# with 10 pods). Upstream crictl is a benchmark peer, not a dependency: it is built once, outside this
# module, into /var/cache/nodekit/crictl-v1.37.0.
set -euo pipefail
cd "$(dirname "$0")/../.."
UPSTREAM_DIR=${UPSTREAM_DIR:-/var/cache/nodekit/crictl-v1.37.0}
N=${N:-20}
if [[ ! -x $UPSTREAM_DIR/crictl ]]; then
	mkdir -p "$UPSTREAM_DIR"
	echo "building upstream crictl v1.37.0 into $UPSTREAM_DIR (a few minutes)..." >&2
	(cd /tmp && GOFLAGS=-mod=mod GOBIN="$UPSTREAM_DIR" go install sigs.k8s.io/cri-tools/cmd/crictl@v1.37.0)
fi
mkdir -p _output
go build -o _output/nodekit ./cmd/nodekit
CRICTL_UPSTREAM=$UPSTREAM_DIR/crictl NODEKIT_BIN=$PWD/_output/nodekit \
	go test -run '^$' -bench BenchmarkCrictl -benchtime "${N}x" -v ./bench/crictl/
