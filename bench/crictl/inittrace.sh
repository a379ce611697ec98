#!/usr/bin/env bash
# Shows what a crictl invocation spends in Go package initialisation (GODEBUG=inittrace=1), for the full
# nodekit binary and for the crictl-only build (cmd/crictl): totals, the modules the time
# goes to, and the costliest packages. Each package counts with its fastest time over RUNS runs of
# `crictl --help` (no runtime needed), which filters out the noise of a loaded machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-9}
mkdir -p _output
go build -o _output/nodekit ./cmd/nodekit
go build -o _output/crictl-standalone ./cmd/crictl
go list -deps ./crictl > _output/crictl-deps.txt

report() { # name, command...
	local name=$1
	shift
	for _ in $(seq "$RUNS"); do GODEBUG=inittrace=1 "$@" --help 2>&1 >/dev/null | grep '^init '; done |
		awk -v name="$name" '
			FNR == NR { own[$1] = 1; next }
			{ if (!($2 in ms) || $5 < ms[$2]) ms[$2] = $5; bytes[$2] = $8 }
			END {
				for (p in ms) {
					t = ms[p]; total += t; alloc += bytes[p]
					if (p in own) owntotal += t
					m = p; sub(/\/.*/, "", m)
					if (m ~ /\./) { n = split(p, parts, "/"); m = parts[1] "/" parts[2] }
					mod[m] += t
				}
				printf "%s: %.1f ms of package init (%.1f MB allocated), %.1f ms of it in packages crictl imports\n", name, total, alloc / 1e6, owntotal
				printf "  by module:\n"
				for (m in mod) if (mod[m] >= 0.3) printf "    %6.2f ms  %s\n", mod[m], m | "sort -rn"
				close("sort -rn")
				printf "  costliest packages:\n"
				for (p in ms) printf "    %6.2f ms  %s%s\n", ms[p], p, (p in own ? "  (imported by crictl)" : "") | "sort -rn | head -10"
				close("sort -rn | head -10")
			}' _output/crictl-deps.txt -
}
report "nodekit crictl" _output/nodekit crictl
report "standalone crictl" _output/crictl-standalone
