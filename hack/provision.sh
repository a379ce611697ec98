#!/usr/bin/env bash
# Provisions one nodekit node from a checkout mounted at $NODEKIT_SRC (default /nodekit: Vagrant's synced
# folder, the VM test leg's 9p share), with hack/install.sh and the units of hack/systemd only. Both the
# Vagrantfile (hack/vagrant) and the VM test leg (hack/vm/run.sh, `make vm-test`) run it, as root, in the
# guest:
#
#   provision.sh server --ip IP --name NAME
#   provision.sh agent  --ip IP --name NAME --server-ip IP
#
# server: install.sh server (advertise address and node IP = IP), waits until the API server answers,
# then `nodekit token create` and leaves the join token and the CA hash in $NODEKIT_SRC/.nodekit/
# (join-token, ca-hash; mode 0600: lab secrets, the folder is the host checkout).
# agent: install.sh agent --token --ca-hash with them (token join), node IP = IP.
# The binaries come from $NODEKIT_SRC/bin and the bundled images from $NODEKIT_SRC/_output/images
# (install.sh's defaults for a checkout): run `make build images` on the host first.
set -euo pipefail

src=${NODEKIT_SRC:-/nodekit}
data_dir=${NODEKIT_DATA_DIR:-/var/lib/nodekit}
die() {
	echo "provision.sh: $*" >&2
	exit 1
}
[ $# -ge 1 ] || die "usage: provision.sh server|agent --ip IP --name NAME [--server-ip IP]"
role=$1
shift
ip='' name='' server_ip=''
while [ $# -gt 0 ]; do
	case $1 in
	--ip) ip=${2:?--ip needs an address}; shift 2 ;;
	--name) name=${2:?--name needs a node name}; shift 2 ;;
	--server-ip) server_ip=${2:?--server-ip needs an address}; shift 2 ;;
	*) die "unknown flag '$1'" ;;
	esac
done
{ [ -n "$ip" ] && [ -n "$name" ]; } || die "--ip and --name are required"
[ -x "$src/hack/install.sh" ] || die "$src/hack/install.sh not found: is the checkout mounted at $src?"

case $role in
server)
	"$src/hack/install.sh" server --advertise-address "$ip" --node-name "$name" --node-ip "$ip"
	# The API server may take minutes to come up on a slow (emulated) machine: wait for the admin
	# kubeconfig, then retry the token until the API server answers (bounded).
	kubeconfig=$data_dir/admin.kubeconfig
	deadline=$((SECONDS + ${NODEKIT_PROVISION_TIMEOUT:-900}))
	until [ -s "$kubeconfig" ]; do
		[ $SECONDS -lt $deadline ] || die "no $kubeconfig after ${NODEKIT_PROVISION_TIMEOUT:-900} s (journalctl -u nodekit-server)"
		sleep 2
	done
	until out=$(/usr/local/bin/nodekit token create --kubeconfig "$kubeconfig" 2>&1); do
		[ $SECONDS -lt $deadline ] || die "nodekit token create: $out"
		sleep 3
	done
	token=$(grep -oE '[a-z0-9]{6}[.][a-z0-9]{16}' <<<"$out" | head -n1 || true)
	hash=$(grep -oE 'sha256:[0-9a-f]{64}' <<<"$out" | head -n1 || true)
	{ [ -n "$token" ] && [ -n "$hash" ]; } || die "nodekit token create printed no token and hash: $out"
	umask 077
	mkdir -p "$src/.nodekit"
	echo "$token" >"$src/.nodekit/join-token"
	echo "$hash" >"$src/.nodekit/ca-hash"
	echo "provision.sh: join token and CA hash in $src/.nodekit/"
	;;
agent)
	[ -n "$server_ip" ] || die "agent: --server-ip is required"
	{ [ -s "$src/.nodekit/join-token" ] && [ -s "$src/.nodekit/ca-hash" ]; } ||
		die "no $src/.nodekit/join-token or ca-hash: provision the server first"
	"$src/hack/install.sh" agent --server "https://$server_ip:6443" --token "$(cat "$src/.nodekit/join-token")" \
		--ca-hash "$(cat "$src/.nodekit/ca-hash")" --node-name "$name" --node-ip "$ip"
	;;
*) die "unknown role '$role': use server or agent" ;;
esac
