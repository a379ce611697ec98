#!/usr/bin/env bash
# Builds the upstream conformance tools of k8s.io/kubernetes $KUBE_VERSION from the Go module proxy in a
# throwaway module under $CACHE (never inside the nodekit tree): e2e.test, ginkgo, kubectl and agnhost.
# A rerun with the same template and version does not rebuild (a stamp file records what was built).
#
#   CACHE          cache root (default /var/cache/nodekit/conformance)
#   KUBE_VERSION   default 1.37.2 (the staging modules are replaced with v0.<minor>.<patch>)
#   NICE           niceness of the builds (default 15: other work shares the CPU)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
KUBE_VERSION=${KUBE_VERSION:-1.37.2}
STAGING_VERSION=0.${KUBE_VERSION#1.}
CACHE=${CACHE:-/var/cache/nodekit/conformance}
NICE=${NICE:-15}
GO=${GO:-go}
mod=$CACHE/v$KUBE_VERSION/module
bin=$CACHE/v$KUBE_VERSION/bin
mkdir -p "$mod" "$bin"

log() { printf '%s conformance: %s\n' "$(date +%T)" "$*" >&2; }

# The stamp is the hash of the templates and the version: a changed template rebuilds everything.
stamp=$(cat "$here"/module/*.tmpl <(echo "$KUBE_VERSION") | sha256sum | cut -c1-16)
if [[ -f $bin/.stamp && $(cat "$bin/.stamp") == "$stamp" ]] &&
	[[ -x $bin/e2e.test && -x $bin/ginkgo && -x $bin/kubectl && -x $bin/agnhost ]]; then
	log "tools of v$KUBE_VERSION are built in $bin (cached)"
	exit 0
fi

sed -e "s/@KUBE_VERSION@/$KUBE_VERSION/g" -e "s/@STAGING_VERSION@/$STAGING_VERSION/g" \
	"$here/module/go.mod.tmpl" >"$mod/go.mod"
cp "$here/module/tools.go.tmpl" "$mod/tools.go"
cd "$mod"
export GOFLAGS=-mod=mod
log "go mod tidy in $mod"
nice -n "$NICE" "$GO" mod tidy

# The version variables upstream's hack/lib/version.sh sets, so the binaries report v$KUBE_VERSION
# (kubectl's version-skew check and the e2e framework print and compare them).
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION")
 -X $pkg.gitTreeState=clean -X $pkg.gitCommit=v$KUBE_VERSION"
ldflags=${ldflags//$'\n'/}
t0=$SECONDS
log "building ginkgo"
nice -n "$NICE" "$GO" build -o "$bin/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
log "building kubectl"
CGO_ENABLED=0 nice -n "$NICE" "$GO" build -ldflags "$ldflags" -o "$bin/kubectl" k8s.io/kubernetes/cmd/kubectl
log "building agnhost (static)"
CGO_ENABLED=0 nice -n "$NICE" "$GO" build -ldflags "-s -w" -o "$bin/agnhost" k8s.io/kubernetes/test/images/agnhost
log "building e2e.test"
nice -n "$NICE" "$GO" test -c -ldflags "$ldflags" -o "$bin/e2e.test" k8s.io/kubernetes/test/e2e
echo "$stamp" >"$bin/.stamp"
log "tools built in $((SECONDS - t0)) s into $bin"
