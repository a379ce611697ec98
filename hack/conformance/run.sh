#!/usr/bin/env bash
# `make conformance`: runs the upstream Kubernetes conformance suite (e2e.test of k8s.io/kubernetes
# $KUBE_VERSION, built from the Go module proxy) against a two-node `nodekit lab`, offline, and writes
# JUnit and a summary under $OUT. See docs/conformance.md.
#
#   FOCUS, SKIP    ginkgo regexps selecting the specs (default: every [Conformance] spec, none skipped)
#   SPECS_FILE     a file of spec full texts, one per line ('#' comments): exactly those specs
#                  (FOCUS is ignored); every one must exist in the suite
#   STRICT=1       exit 1 unless every selected spec passed (the CI subset)
#   WALL_MINUTES   wall-time bound of the test run (default 600); specs not started by then are
#                  reported "not run"
#   CHUNK          specs per e2e.test process (default 10). A process that dies without its report
#                  (a panic in a spec's goroutine, a kill at the bound) has its specs rerun one by one,
#                  so one crashing spec is recorded as crashed and the run goes on
#   PROCS          ginkgo processes for the non-[Serial] specs (default 1; 2 at most on 2 cores);
#                  [Serial] specs always run alone, after the others, as sonobuoy does
#   NODES          lab nodes (default 2)
#   OUT            results (default _output/conformance): junit.xml, summary.txt, chunks/*/e2e.log
#   CACHE          tools and images (default /var/cache/nodekit/conformance), reused across runs
#   KEEP_LAB=1     leave the lab up afterwards (default: `lab down` on every exit)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export KUBE_VERSION=${KUBE_VERSION:-1.37.2}
export CACHE=${CACHE:-/var/cache/nodekit/conformance}
OUT=${OUT:-$repo/_output/conformance}
FOCUS=${FOCUS:-'\[Conformance\]'}
SPECS_FILE=${SPECS_FILE:-}
STRICT=${STRICT:-}
SKIP=${SKIP:-}
WALL_MINUTES=${WALL_MINUTES:-600}
CHUNK=${CHUNK:-10}
PROCS=${PROCS:-1}
NODES=${NODES:-2}
# The lab gets its own names, subnet, pod network, etcd port and data dir, so it never meets a
# `nodekit lab` someone else runs on this host.
LAB_DIR=${LAB_DIR:-/var/lib/nodekit-conformance}
LAB_PREFIX=${LAB_PREFIX:-nkcf}
LAB_SUBNET=${LAB_SUBNET:-172.30.50.0/24}
LAB_CLUSTER_CIDR=${LAB_CLUSTER_CIDR:-10.246.0.0/16}
LAB_ETCD=${LAB_ETCD:-127.0.0.1:23791}
GO=${GO:-go}
tools=$CACHE/v$KUBE_VERSION/bin
nodekit=$repo/bin/nodekit
kubeconfig=$LAB_DIR/server/admin.kubeconfig
log() { printf '%s conformance: %s\n' "$(date +%T)" "$*" >&2; }

# --- build (cached) ---
"$here/build-tools.sh"
"$here/build-images.sh"
(cd "$repo" && $GO build -o "$tools/report" ./hack/conformance/report && make --no-print-directory build images >/dev/null)
rm -rf "$OUT" && mkdir -p "$OUT/chunks" "$OUT/images"
# The lab's nodes import every archive of one directory: nodekit's bundled images and the suite's.
cp "$repo"/_output/images/*.tar "$CACHE/v$KUBE_VERSION"/images/*.tar "$OUT/images/"

# --- the lab, torn down on every exit ---
lab_pid=
teardown() {
	local rc=$?
	if [[ ${KEEP_LAB:-} == 1 ]]; then
		log "KEEP_LAB=1: lab left up (KUBECONFIG=$kubeconfig; '$nodekit --data-dir $LAB_DIR lab down' removes it)"
		exit $rc
	fi
	log "tearing the lab down"
	if [[ -n $lab_pid ]] && kill -0 "$lab_pid" 2>/dev/null; then
		kill -TERM "$lab_pid" && wait "$lab_pid" || true
	fi
	"$nodekit" --data-dir "$LAB_DIR" lab down >>"$OUT/lab.log" 2>&1 || log "lab down failed: see $OUT/lab.log"
	exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM
log "starting a $NODES-node lab ($LAB_PREFIX on $LAB_SUBNET, data in $LAB_DIR)"
"$nodekit" --data-dir "$LAB_DIR" lab down >/dev/null 2>&1 || true
# The lab's nodes share this host's disk with everything else on it, so upstream's default thresholds
# (image GC at 85 % use, evictionHard imagefs.available<15 %) would taint the nodes with disk-pressure and
# stop every spec's pods when the host disk fills with other work; no conformance spec tests them. The
# kubelets get the settings of nodekit's own test harness (test/framework/agent): no image GC, only the
# memory eviction threshold.
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 100\nevictionHard:\n  memory.available: 100Mi\n' \
	>"$OUT/kubelet-config.yaml"
"$nodekit" --data-dir "$LAB_DIR" lab up --nodes "$NODES" --prefix "$LAB_PREFIX" --subnet "$LAB_SUBNET" \
	--cluster-cidr "$LAB_CLUSTER_CIDR" --etcd-listen-client "$LAB_ETCD" --images-dir "$OUT/images" \
	--kubelet-config "$OUT/kubelet-config.yaml" >"$OUT/lab.log" 2>&1 &
lab_pid=$!
kubectl() { "$tools/kubectl" --kubeconfig "$kubeconfig" "$@"; }
deadline=$((SECONDS + 600))
until [[ -f $kubeconfig ]] && [[ $(kubectl get nodes --no-headers 2>/dev/null | grep -cw Ready) == "$NODES" ]]; do
	kill -0 "$lab_pid" 2>/dev/null || { log "lab up exited: see $OUT/lab.log"; tail -20 "$OUT/lab.log" >&2; exit 1; }
	((SECONDS < deadline)) || { log "nodes not Ready after 10 min: see $OUT/lab.log"; exit 1; }
	sleep 2
done
kubectl get nodes -o wide >&2
kubectl version -o json >"$OUT/version.json" 2>/dev/null || true

# --- the specs ---
e2e_args=(--provider=local --kubeconfig="$kubeconfig" --kubectl-path="$tools/kubectl" --ginkgo.no-color
	--disable-log-dump --dump-logs-on-failure=false --e2e-output-dir="$OUT/e2e")
mkdir -p "$OUT/e2e"
if [[ -n $SPECS_FILE ]]; then
	grep -v -e '^#' -e '^$' "$SPECS_FILE" >"$OUT/wanted.txt"
	FOCUS=$("$tools/report" focus <"$OUT/wanted.txt")
fi
"$tools/e2e.test" "${e2e_args[@]}" --ginkgo.dry-run --ginkgo.focus="$FOCUS" ${SKIP:+--ginkgo.skip="$SKIP"} \
	--ginkgo.json-report="$OUT/dryrun.json" >"$OUT/dryrun.log" 2>&1
"$tools/report" specs "$OUT/dryrun.json" >"$OUT/specs.tsv"
log "$(wc -l <"$OUT/specs.tsv") specs selected ($(grep -c '^serial' "$OUT/specs.tsv" || true) [Serial])"
if [[ -n $SPECS_FILE ]]; then
	missing=$(cut -f2 "$OUT/specs.tsv" | grep -vxF -f - "$OUT/wanted.txt" || true)
	[[ -z $missing ]] || { log "specs of $SPECS_FILE not in the suite: $missing"; exit 1; }
fi

wall_end=$((SECONDS + WALL_MINUTES * 60))
n=0
# run_chunk KIND TEXT...: one e2e.test process for these specs. Without a report, each spec is rerun
# alone; a spec that still leaves none is recorded in crashed.tsv with the process's last words.
run_chunk() {
	local kind=$1
	shift
	local left=$((wall_end - SECONDS))
	((left > 60)) || return 0
	n=$((n + 1))
	local dir=$OUT/chunks/$(printf '%03d' $n)-$kind
	mkdir -p "$dir"
	printf '%s\n' "$@" >"$dir/specs.txt"
	local focus rc=0
	focus=$(printf '%s\n' "$@" | "$tools/report" focus)
	log "chunk $n ($kind, $# specs, ${left}s of wall time left)"
	if [[ $kind == parallel && $PROCS -gt 1 && $# -gt 1 ]]; then
		timeout --kill-after=30 "$left" "$tools/ginkgo" --procs="$PROCS" --no-color --timeout="${left}s" \
			--focus="$focus" --junit-report=junit.xml --output-dir="$dir" "$tools/e2e.test" -- "${e2e_args[@]}" \
			>"$dir/e2e.log" 2>&1 || rc=$?
	else
		timeout --kill-after=30 "$left" "$tools/e2e.test" "${e2e_args[@]}" --ginkgo.focus="$focus" \
			--ginkgo.timeout="${left}s" --ginkgo.junit-report="$dir/junit.xml" >"$dir/e2e.log" 2>&1 || rc=$?
	fi
	[[ -s $dir/junit.xml ]] && return 0
	if (($# > 1)); then
		log "chunk $n left no report (exit $rc): rerunning its specs one by one"
		local t
		for t in "$@"; do run_chunk "$kind" "$t"; done
		return 0
	fi
	# The panic's message and the first suite frame (k8s.io/kubernetes/test/...) of its stack, without colours.
	local why plain
	plain=$(sed 's/\x1b\[[0-9;]*m//g' "$dir/e2e.log")
	why=$(sed -n -E '/panic:|fatal error:/{s/.*(panic:|fatal error:)/\1/;p;n;p;q}' <<<"$plain" | tr -s ' \t\n' ' ')
	why+=" at $(grep -m1 -o -E 'k8s.io/kubernetes@[^/]+/test/[^ ]+\.go:[0-9]+' <<<"$plain" | sed 's/^k8s.io\/kubernetes@[^/]*\///' || echo '?')"
	[[ $rc == 124 || $rc == 137 ]] && why="killed at the wall-time bound (exit $rc)"
	printf '%s\te2e.test exited %d without a report: %s\n' "$1" "$rc" "$why" >>"$OUT/crashed.tsv"
	log "crashed: $1"
}

for kind in parallel serial; do
	mapfile -t list < <(awk -F'\t' -v k="$kind" '$1 == k {print $2}' "$OUT/specs.tsv")
	for ((i = 0; i < ${#list[@]}; i += CHUNK)); do
		run_chunk "$kind" "${list[@]:i:CHUNK}"
	done
done

shopt -s nullglob
"$tools/report" summary -specs "$OUT/specs.tsv" -out "$OUT" -crashed "$OUT/crashed.tsv" \
	-notrun "not run: the ${WALL_MINUTES}-minute wall-time bound was reached first" "$OUT"/chunks/*/junit.xml
log "JUnit: $OUT/junit.xml, summary: $OUT/summary.txt"
if [[ -n $STRICT ]]; then
	read -r total passed < <(sed -n -E '1s/.*total ([0-9]+), passed ([0-9]+),.*/\1 \2/p' "$OUT/summary.txt")
	if [[ -z $total || $passed != "$total" ]]; then
		log "STRICT: ${passed:-?} of ${total:-?} specs passed (failures in $OUT/summary.txt)"
		exit 1
	fi
fi
