#!/usr/bin/env bash
# Installs, idempotently and quietly, what a nodekit node and nodekit's tests need on Debian 12 / Ubuntu:
# containerd, runc, the CNI reference plugins (a benchmark peer and fallback), iptables, nft (tests read the
# nftables proxy mode's table with it), conntrack, ipset,
# iproute2, ping, jq and dig (docs/labs, README's DNS check), etcdctl, kubectl (Debian's kubernetes-client, unless a kubectl is already installed), and the
# linters the tests run on hack/ (shellcheck, ruby -c, systemd-analyze verify).
# Safe to rerun: it does nothing and prints nothing when everything is present.
#
#   install-deps.sh          install what is missing
#   install-deps.sh --list   print every Debian package it would install, one a line (hack/vm/image.sh
#                            preinstalls them into the VM guest image, which has no route to a mirror)
set -euo pipefail

# command -> Debian package
declare -A want=(
	[containerd]=containerd
	[runc]=runc
	[iptables]=iptables
	[iptables-restore]=iptables
	[nft]=nftables
	[conntrack]=conntrack
	[ipset]=ipset
	[ip]=iproute2
	[etcdctl]=etcd-client
	[kubectl]=kubernetes-client
	[curl]=curl
	[git]=git
	[make]=make
	[gcc]=gcc
	[shellcheck]=shellcheck
	[ruby]=ruby
	[systemd-analyze]=systemd
	[nsenter]=util-linux
	[ping]=iputils-ping
	[jq]=jq
	[dig]=bind9-dnsutils
)
# files -> Debian package
declare -A want_files=(
	[/usr/lib/cni/bridge]=containernetworking-plugins
)

if [ "${1:-}" = --list ]; then
	printf '%s\n' "${want[@]}" "${want_files[@]}" | sort -u
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: run as root (apt-get install needs it)" >&2
	exit 1
fi

missing=()
for cmd in "${!want[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done
for f in "${!want_files[@]}"; do
	[ -e "$f" ] || missing+=("${want_files[$f]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install-deps: installing ${pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
