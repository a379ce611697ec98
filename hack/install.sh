#!/usr/bin/env bash
# Installs nodekit on a Debian/Ubuntu host as systemd services, as a server or as an agent joining one.
#
#   install.sh server [--advertise-address IP] [--node-name NAME] [--cluster-dns IP] [-- EXTRA SERVER FLAGS]
#   install.sh agent  --server https://HOST:6443 (--token TOKEN --ca-hash sha256:HEX | --kubeconfig FILE)
#                     [--node-name NAME] [--node-ip IP] [--cluster-dns IP] [-- EXTRA AGENT FLAGS]
#
# Every node's kubelet gets the cluster DNS: --cluster-dns (default 10.96.0.10, the kube-dns Service of
# the default service range; give the tenth address of the server's --service-cluster-ip-range when it
# differs) and the domain cluster.local.
#
# An agent joins with a bootstrap token and the CA hash that 'nodekit token create' prints on the server:
# on its first start it pins the server's CA by that hash, requests its client certificate with the token
# and writes $NODEKIT_DATA_DIR/kubelet.kubeconfig (kept across restarts). The token and hash go to
# /etc/nodekit/agent.env (mode 0600) as NODEKIT_TOKEN and NODEKIT_CA_HASH, never onto a command line.
#
# What it does: installs the host packages (containerd, runc, iptables, conntrack, ...), copies the
# nodekit and nodekit-cni binaries to $PREFIX/bin, writes /etc/nodekit/<role>.env, installs the units of
# hack/systemd and, when systemd runs, enables and starts them. The agent runs the kubelet and the service
# proxy. A server also runs its own agent, so it is a node too.
#
# Environment:
#   NODEKIT_BIN_DIR   directory holding nodekit and nodekit-cni (default: bin/ of this checkout)
#   NODEKIT_IMAGES_DIR  bundled image archives (pause, coredns, demo) copied to $NODEKIT_DATA_DIR/images,
#                     which the agent imports at start (default: _output/images of this checkout, if built)
#   NODEKIT_DATA_DIR  data directory (default /var/lib/nodekit)
#   PREFIX            install prefix of the binaries (default /usr/local)
#   DESTDIR           root the files are written under (default /; for packaging and tests)
#   NODEKIT_SKIP_DEPS=1   do not apt-get install the host packages
#   NODEKIT_NO_START=1    install only; do not enable or start the services
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin_dir=${NODEKIT_BIN_DIR:-$here/../bin}
images_dir=${NODEKIT_IMAGES_DIR:-$here/../_output/images}
data_dir=${NODEKIT_DATA_DIR:-/var/lib/nodekit}
prefix=${PREFIX:-/usr/local}
destdir=${DESTDIR:-}
etc_dir=$destdir/etc/nodekit
unit_dir=$destdir/etc/systemd/system

die() {
	echo "install.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[ $# -ge 1 ] || usage
role=$1
shift
case $role in
server | agent) ;;
-h | --help) usage ;;
*) die "unknown role '$role': use server or agent" ;;
esac

server_url='' token='' ca_hash='' kubeconfig='' node_name='' node_ip='' advertise='' cluster_dns=10.96.0.10
extra=()
while [ $# -gt 0 ]; do
	case $1 in
	--server) server_url=${2:?--server needs a URL}; shift 2 ;;
	--token) token=${2:?--token needs a value}; shift 2 ;;
	--ca-hash) ca_hash=${2:?--ca-hash needs sha256:HEX}; shift 2 ;;
	--kubeconfig) kubeconfig=${2:?--kubeconfig needs a file}; shift 2 ;;
	--node-name) node_name=${2:?--node-name needs a name}; shift 2 ;;
	--node-ip) node_ip=${2:?--node-ip needs an address}; shift 2 ;;
	--advertise-address) advertise=${2:?--advertise-address needs an address}; shift 2 ;;
	--cluster-dns) cluster_dns=${2:?--cluster-dns needs an address}; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	*) die "unknown flag '$1'" ;;
	esac
done

if [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
	die "run as root (it installs packages, binaries and systemd units)"
fi
if [ -r /etc/os-release ]; then
	# shellcheck disable=SC1091
	. /etc/os-release
	case " ${ID:-} ${ID_LIKE:-} " in
	*" debian "* | *" ubuntu "*) ;;
	*) die "this installer supports Debian and Ubuntu (found ID=${ID:-unknown})" ;;
	esac
fi
for b in nodekit nodekit-cni; do
	[ -x "$bin_dir/$b" ] || die "$bin_dir/$b not found: run 'make build' or set NODEKIT_BIN_DIR"
done

if [ "$role" = agent ]; then
	[ -n "$server_url" ] || die "agent: --server https://HOST:6443 is required"
	case $server_url in https://*) ;; *) die "agent: --server '$server_url' must be an https:// URL" ;; esac
	if [ -n "$token" ] && [ -n "$kubeconfig" ]; then
		die "agent: give --token or --kubeconfig, not both"
	elif [ -n "$token" ]; then
		# Token join: the agent presents the server-issued token and receives its node client certificate.
		[[ $token =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] ||
			die "agent: --token is not a bootstrap token (<6 chars>.<16 chars> of [a-z0-9], as 'nodekit token create' prints)"
		[ -n "$ca_hash" ] || die "agent: --ca-hash sha256:HEX is required with --token ('nodekit token create' prints it)"
		[[ $ca_hash =~ ^sha256:[0-9a-fA-F]{64}$ ]] || die "agent: --ca-hash '$ca_hash' is not sha256: and 64 hex digits"
	elif [ -n "$kubeconfig" ]; then
		[ -r "$kubeconfig" ] || die "agent: --kubeconfig $kubeconfig is not readable"
	else
		die "agent: --token TOKEN or --kubeconfig FILE is required to join the server"
	fi
	[ -z "$ca_hash" ] || [ -n "$token" ] || die "agent: --ca-hash goes with --token"
fi

if [ -z "${NODEKIT_SKIP_DEPS:-}" ]; then
	if [ -x "$here/install-deps.sh" ]; then
		"$here/install-deps.sh"
	else
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q containerd runc containernetworking-plugins \
			iptables conntrack ipset iproute2 >/dev/null
	fi
fi

echo "installing nodekit ($role) into ${destdir}${prefix}/bin"
install -d -m 0755 "$destdir$prefix/bin" "$etc_dir" "$unit_dir"
install -m 0755 "$bin_dir/nodekit" "$bin_dir/nodekit-cni" "$destdir$prefix/bin/"
# The bundled images (no registry is needed for pause, coredns and the demo).
if compgen -G "$images_dir/*.tar" >/dev/null; then
	install -d -m 0755 "$destdir$data_dir/images"
	install -m 0644 "$images_dir"/*.tar "$destdir$data_dir/images/"
fi

# quote renders words for a systemd EnvironmentFile value (double-quoted, escapes for " and \).
quote() {
	local out='' w
	for w in "$@"; do
		w=${w//\\/\\\\}
		w=${w//\"/\\\"}
		out+="${out:+ }$w"
	done
	printf '"%s"' "$out"
}

node_args=(--cluster-dns "$cluster_dns" --cluster-domain cluster.local)
for a in "${extra[@]}"; do
	# The extra flags' own cluster DNS wins (a repeated --cluster-dns would add a second server).
	case $a in --cluster-dns | --cluster-dns=*) node_args=() ;; esac
done
[ -n "$node_name" ] && node_args+=(--node-name "$node_name")
[ -n "$node_ip" ] && node_args+=(--node-ip "$node_ip")
units=(nodekit-agent.service)
if [ "$role" = server ]; then
	server_args=()
	[ -n "$advertise" ] && server_args+=(--advertise-address "$advertise")
	server_args+=("${extra[@]}")
	umask 077
	{
		echo "# nodekit server settings (hack/install.sh)"
		echo "NODEKIT_DATA_DIR=$data_dir"
		echo "NODEKIT_SERVER_ARGS=$(quote "${server_args[@]}")"
	} >"$etc_dir/server.env"
	# The server's own node uses the admin kubeconfig it writes; the agent waits for it.
	agent_kubeconfig=$data_dir/admin.kubeconfig
	agent_args=(--kubeconfig "$agent_kubeconfig" "${node_args[@]}")
	units=(nodekit-server.service "${units[@]}")
else
	if [ -n "$token" ]; then
		# Written by the agent's first start (the join), in its data dir.
		agent_kubeconfig=$data_dir/kubelet.kubeconfig
	else
		agent_kubeconfig=/etc/nodekit/agent.kubeconfig
		install -m 0600 "$kubeconfig" "$etc_dir/agent.kubeconfig"
	fi
	agent_args=(--server "$server_url" --kubeconfig "$agent_kubeconfig" "${node_args[@]}" "${extra[@]}")
fi
umask 077
{
	echo "# nodekit agent settings (hack/install.sh)"
	echo "NODEKIT_DATA_DIR=$data_dir"
	echo "NODEKIT_AGENT_ARGS=$(quote "${agent_args[@]}")"
	if [ -n "$token" ]; then
		echo "NODEKIT_TOKEN=$token"
		echo "NODEKIT_CA_HASH=$ca_hash"
	fi
} >"$etc_dir/agent.env"
umask 022
# The agent runs the service proxy now: stop and remove an older install's nodekit-proxy.service.
if [ -e "$unit_dir/nodekit-proxy.service" ]; then
	if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
		systemctl disable --now nodekit-proxy.service || true
	fi
	rm -f "$unit_dir/nodekit-proxy.service"
fi
for u in "${units[@]}"; do
	sed "s|/usr/local/bin/nodekit|$prefix/bin/nodekit|" "$here/systemd/$u" >"$unit_dir/$u"
	chmod 0644 "$unit_dir/$u"
done
echo "installed: ${units[*]} and $etc_dir/{$( [ "$role" = server ] && echo server.env,)agent.env}"

if [ -n "${NODEKIT_NO_START:-}" ] || [ -n "$destdir" ]; then
	echo "not starting the services (NODEKIT_NO_START or DESTDIR set)"
	exit 0
fi
if [ ! -d /run/systemd/system ]; then
	echo "systemd does not run here: start the services by hand, e.g. '$prefix/bin/nodekit $role --data-dir $data_dir'" >&2
	exit 0
fi
systemctl daemon-reload
systemctl enable "${units[@]}"
# Started without waiting for READY=1: on a slow machine the server's first start can take minutes (or
# fail once and be restarted: Restart=always), and the agent is ready only once its Node is registered,
# which needs the server. A blocking start would fail the install for what the units recover from.
systemctl start --no-block "${units[@]}"
echo "starting: ${units[*]} (systemctl status ${units[*]}; journalctl -u nodekit-$role -f)"
if [ "$role" = server ]; then
	echo "kubeconfig: $data_dir/admin.kubeconfig"
fi
