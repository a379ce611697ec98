#!/usr/bin/env bash
# Builds upstream kube-proxy v$KUBE_VERSION from the Go module proxy in a throwaway module under $DIR (never
# inside the nodekit tree), for the side-by-side proxy benchmark (bench/proxy, docs/proxy.md). The module
# is hack/conformance/module/go.mod.tmpl (k8s.io/kubernetes required, every k8s.io staging module replaced
# by its published v0.x tag). A rerun does not rebuild when the binary is there.
#
#   KUBE_VERSION   default 1.37.2
#   DIR            default /var/cache/nodekit/kube-proxy-v$KUBE_VERSION (the binary is $DIR/bin/kube-proxy)
#   NICE           niceness of the build (default 15)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
KUBE_VERSION=${KUBE_VERSION:-1.37.2}
STAGING_VERSION=0.${KUBE_VERSION#1.}
DIR=${DIR:-/var/cache/nodekit/kube-proxy-v$KUBE_VERSION}
NICE=${NICE:-15}
GO=${GO:-go}
if [[ -x $DIR/bin/kube-proxy ]]; then
	echo "kube-proxy v$KUBE_VERSION is built in $DIR/bin (cached)" >&2
	exit 0
fi
mkdir -p "$DIR/module" "$DIR/bin"
sed -e "s/@KUBE_VERSION@/$KUBE_VERSION/g" -e "s/@STAGING_VERSION@/$STAGING_VERSION/g" \
	-e "s|^module .*|module nodekit.local/kube-proxy|" \
	"$here/conformance/module/go.mod.tmpl" >"$DIR/module/go.mod"
cat >"$DIR/module/tools.go" <<'GO'
//go:build tools

// Package tools pins kube-proxy's packages for `go mod tidy`.
package tools

import _ "k8s.io/kubernetes/cmd/kube-proxy/app"
GO
cd "$DIR/module"
export GOFLAGS=-mod=mod
nice -n "$NICE" "$GO" mod tidy
pkg=k8s.io/component-base/version
nice -n "$NICE" "$GO" build -ldflags "-s -w -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION") -X $pkg.gitTreeState=clean -X $pkg.gitCommit=v$KUBE_VERSION" \
	-o "$DIR/bin/kube-proxy.tmp" k8s.io/kubernetes/cmd/kube-proxy
mv "$DIR/bin/kube-proxy.tmp" "$DIR/bin/kube-proxy"
echo "kube-proxy v$KUBE_VERSION built into $DIR/bin" >&2
