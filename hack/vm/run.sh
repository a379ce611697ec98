#!/usr/bin/env bash
# The VM test leg (`make vm-test`, docs/vm-test.md): one server and two agent VMs under qemu, nodekit
# installed in them only by hack/provision.sh (hack/install.sh and the units of hack/systemd: the server,
# then the agents by token join: what hack/vagrant runs too), then the checks, each printed with its
# time. Exits 0 only when every check passes.
#
# The guests boot the image of hack/vm/image.sh (built and cached under $NODEKIT_VM_CACHE first when
# absent) with software emulation (TCG: this machine cannot use KVM), each on a qcow2 overlay of it, with
# this checkout (its bin/, _output/images and hack/: `make build images` first) shared over 9p at
# /nodekit, as Vagrant's synced folder. Their network exists only inside a network namespace this script
# makes: a bridge, one tap per VM, the private /24 $NODEKIT_VM_NET (default 192.168.213; the bridge is .1,
# the server .10, agentN .1N). Commands run in the guests over ssh from that namespace. Everything (qemu
# processes, by PID; overlays; the namespace with its bridge and taps; the join token left in .nodekit/)
# is removed on every exit.
#
# Environment: NODEKIT_VM_AGENTS (0..2, default 2; fewer VMs while developing: the checks that need the
# agents then fail), NODEKIT_VM_MEMORY (MiB per guest, default 2048), NODEKIT_VM_TIMEOUT (seconds each
# awaited condition may take, default 1500), KUBECTL (default: kubectl on PATH).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
agents=${NODEKIT_VM_AGENTS:-2}
memory=${NODEKIT_VM_MEMORY:-2048}
timeout=${NODEKIT_VM_TIMEOUT:-1500}
net=${NODEKIT_VM_NET:-192.168.213}
kubectl_bin=${KUBECTL:-kubectl}
t_start=$SECONDS

die() {
	echo "vm/run.sh: $*" >&2
	exit 1
}
say() { printf '[%5ds] %s\n' "$((SECONDS - t_start))" "$*"; }

[ "$(id -u)" -eq 0 ] || die "run as root (network namespace, taps, image build)"
[[ $agents =~ ^[0-2]$ ]] || die "NODEKIT_VM_AGENTS must be 0, 1 or 2, got '$agents'"
for c in qemu-system-x86_64 qemu-img ssh nsenter "$kubectl_bin"; do
	command -v "$c" >/dev/null || die "$c not found (apt-get install --no-install-recommends qemu-system-x86 qemu-utils openssh-client)"
done
for f in bin/nodekit bin/nodekit-cni _output/images/pause-3.10.tar; do
	[ -e "$repo/$f" ] || die "$repo/$f not found: run 'make build images' first"
done

cache=$("$here/image.sh")
run=$(mktemp -d "$cache/run.XXXXXX")
ns=nkvm-$$
nsfile=/run/netns/$ns
bridge=nkvmbr0
names=(server)
for i in $(seq 1 "$agents"); do names+=("agent$i"); done
declare -A ip pid
ip[server]=$net.10
for i in $(seq 1 "$agents"); do ip[agent$i]=$net.1$i; done

cleanup() {
	local rc=$? n p
	set +e
	for n in "${!pid[@]}"; do
		p=${pid[$n]}
		# pid_max wraps: signal the PID only while it is still our qemu.
		if tr "\0" " " 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$run/$n.qcow2"; then
			kill "$p"
		fi
	done
	for n in "${!pid[@]}"; do
		p=${pid[$n]}
		for _ in $(seq 50); do [ -d "/proc/$p" ] || break; sleep 0.2; done
		if tr "\0" " " 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$run/$n.qcow2"; then kill -9 "$p"; fi
	done
	ip netns del "$ns" 2>/dev/null
	rm -f "$repo/.nodekit/join-token" "$repo/.nodekit/ca-hash"
	rmdir "$repo/.nodekit" 2>/dev/null
	rm -rf "$run"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# gssh NAME CMD...: runs CMD as root in the guest, from the test's namespace.
gssh() {
	local n=$1
	shift
	nsenter --net="$nsfile" ssh -i "$cache/id_ed25519" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o LogLevel=ERROR -o ConnectTimeout=90 -o ServerAliveInterval=30 -o BatchMode=yes "root@${ip[$n]}" "$@"
}
# k ARGS...: kubectl against the server, from the test's namespace.
k() { nsenter --net="$nsfile" "$kubectl_bin" --kubeconfig "$run/admin.kubeconfig" --request-timeout 60s "$@"; }
# await DESC CMD...: runs CMD until it succeeds, for at most $timeout seconds (polling every 3 s).
await() {
	local desc=$1 deadline=$((SECONDS + timeout))
	shift
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			echo "timed out after ${timeout}s waiting for $desc" >&2
			return 1
		fi
		sleep 3
	done
}

passed=() failed=()
# check NAME FUNC: runs FUNC, prints PASS/FAIL with how long it took and the time since the start.
check() {
	local name=$1 t0=$SECONDS out rc=0
	shift
	# In this shell, not a $(...) subshell: a TERM to the script then runs the cleanup trap as soon as
	# the current command (a poll of at most 60 s) returns.
	"$@" >"$run/check.out" 2>&1 || rc=$?
	out=$(<"$run/check.out")
	if [ $rc -eq 0 ]; then
		say "PASS $name ($((SECONDS - t0)) s)${out:+: ${out//$'\n'/; }}"
		passed+=("$name")
	else
		say "FAIL $name ($((SECONDS - t0)) s): ${out//$'\n'/; }"
		failed+=("$name")
	fi
}

# --- network and VMs ---------------------------------------------------------------------------------
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add "$bridge" type bridge
ip -n "$ns" addr add "$net.1/24" dev "$bridge"
ip -n "$ns" link set "$bridge" up

boot() {
	local n=$1 i=$2 tap=nkvm$2
	ip -n "$ns" tuntap add dev "$tap" mode tap
	ip -n "$ns" link set "$tap" master "$bridge" up
	qemu-img create -q -f qcow2 -b "$cache/base.raw" -F raw "$run/$n.qcow2"
	# -nographic's serial console goes to a file; qemu opens the tap inside the namespace (nsenter
	# --net: no mount namespace, so qemu holds no copies of the host's netns mounts).
	nice -n 5 nsenter --net="$nsfile" qemu-system-x86_64 -accel tcg -cpu qemu64 -m "$memory" -smp 1 \
		-nographic -monitor none -serial "file:$run/$n.console" -nodefaults \
		-kernel "$cache/vmlinuz" -initrd "$cache/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=10 ip=${ip[$n]}::$net.1:255.255.255.0:$n:eth0:off systemd.hostname=$n systemd.machine_id=$(printf '%032x' "$((0x6e6b766d00 + i))")" \
		-drive "file=$run/$n.qcow2,if=virtio,format=qcow2,cache=unsafe" \
		-netdev "tap,id=net0,ifname=$tap,script=no,downscript=no" \
		-device "virtio-net-pci,netdev=net0,mac=52:54:00:6b:00:1$i" \
		-virtfs "local,path=$repo,mount_tag=nodekit,security_model=none,id=nodekit" \
		</dev/null >"$run/$n.qemu.log" 2>&1 &
	pid[$n]=$!
}
i=0
for n in "${names[@]}"; do
	boot "$n" "$i"
	i=$((i + 1))
done
say "booting ${names[*]} (qemu TCG, ${memory} MiB each; PIDs ${pid[*]})"
for n in "${names[@]}"; do
	await "$n's sshd" gssh "$n" test -x /nodekit/hack/install.sh || {
		tail -n 20 "$run/$n.console" >&2
		die "$n did not come up"
	}
	say "$n is up ($(gssh "$n" 'uname -r; stat -fc %T /sys/fs/cgroup' | tr '\n' ' '))"
done

# --- install: what a user runs -------------------------------------------------------------------------
t0=$SECONDS
gssh server /nodekit/hack/provision.sh server --ip "${ip[server]}" --name server >"$run/provision-server.log" 2>&1 || {
	cat "$run/provision-server.log" >&2
	gssh server journalctl -u nodekit-server --no-pager -n 40 >&2 || true
	die "provisioning the server failed"
}
say "server provisioned in $((SECONDS - t0)) s (install.sh server, nodekit token create)"
gssh server cat /var/lib/nodekit/admin.kubeconfig >"$run/admin.kubeconfig"
sed -i -E "s#server: https://[^:]+:6443#server: https://${ip[server]}:6443#" "$run/admin.kubeconfig"
for n in "${names[@]:1}"; do
	t0=$SECONDS
	gssh "$n" /nodekit/hack/provision.sh agent --ip "${ip[$n]}" --name "$n" --server-ip "${ip[server]}" \
		>"$run/provision-$n.log" 2>&1 || {
		cat "$run/provision-$n.log" >&2
		die "provisioning $n failed"
	}
	say "$n provisioned in $((SECONDS - t0)) s (install.sh agent --token --ca-hash)"
done

# --- checks ---------------------------------------------------------------------------------------------
ready_nodes() {
	k get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}'
}
all_ready() {
	local n got
	got=$(ready_nodes)
	for n in "${names[@]}"; do grep -qx "$n=True" <<<"$got" || return 1; done
}
check_nodes_ready() {
	await "nodes ${names[*]} Ready" all_ready || { ready_nodes; return 1; }
	ready_nodes | tr '\n' ' '
}
# pods_on NODE: "name ip restarts ready containerIDs" of the demo pods on NODE.
pods_on() {
	k get pods -l app.kubernetes.io/name=demo --field-selector "spec.nodeName=$1,status.phase=Running" \
		-o jsonpath='{range .items[*]}{.metadata.name} {.status.podIP} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready} {.status.containerStatuses[0].containerID}{"\n"}{end}'
}
check_demo_spread() {
	[ "$agents" -eq 2 ] || { echo "needs 2 agents"; return 1; }
	k apply -f "$repo/examples/demo.yaml" >/dev/null
	k rollout status deploy/demo --timeout "${timeout}s" >/dev/null || { k get pods -o wide; return 1; }
	local a1 a2
	a1=$(pods_on agent1 | wc -l) a2=$(pods_on agent2 | wc -l)
	echo "agent1 has $a1, agent2 has $a2 of the demo's pods"
	[ "$a1" -ge 1 ] && [ "$a2" -ge 1 ]
}
# in_pod NODE CMD...: runs CMD in the network namespace of a demo pod on NODE.
in_pod() {
	local n=$1
	shift
	gssh "$n" "nsenter -n -t \$(pgrep -n -x demo-server) $*"
}
check_pod_to_pod() {
	local pod ip2 out
	read -r pod ip2 _ < <(pods_on agent2 | head -n1) || { echo "no demo pod on agent2"; return 1; }
	if ! out=$(in_pod agent1 curl -sS --max-time 10 "http://$ip2:8080/" 2>&1); then
		echo "agent1's pod -> $pod ($ip2) on agent2: $out; agent1's routes: $(gssh agent1 ip route | tr '\n' ';')"
		return 1
	fi
	grep -q "pod=$pod " <<<"$out" || { echo "answer from the wrong pod: $out"; return 1; }
	echo "agent1's pod -> $pod ($ip2) on agent2 answered"
}
# five_answers WHERE CMD...: CMD (a curl of the Service) answers 5 times of 5; prints the pods seen.
five_answers() {
	local where=$1 out seen=() i
	shift
	for i in 1 2 3 4 5; do
		out=$("$@" 2>&1) || { echo "$where: request $i: $out"; return 1; }
		seen+=("$(grep -o 'pod=[^ ]*' <<<"$out")")
	done
	echo "$where: 5/5 ($(printf '%s\n' "${seen[@]}" | sort -u | tr '\n' ' '))"
}
# demo_endpoints: the demo Service's endpoints, "IP:ready:serving:NODE" each, sorted.
demo_endpoints() {
	k get endpointslices -l kubernetes.io/service-name=demo \
		-o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]}:{.conditions.ready}:{.conditions.serving}:{.nodeName}{"\n"}{end}' | sort
}
# demo_pods_ready: every demo pod is Running and Ready, and the EndpointSlices list each one ready.
demo_pods_ready() {
	local ips eps ip ready
	ips=$(k get pods -l app.kubernetes.io/name=demo \
		-o jsonpath='{range .items[*]}{.status.podIP}:{.status.containerStatuses[0].ready}{"\n"}{end}' | sort)
	eps=$(demo_endpoints)
	[ -n "$ips" ] || return 1
	while IFS=: read -r ip ready; do
		[ "$ready" = true ] && grep -q "^$ip:true:" <<<"$eps" || return 1
	done <<<"$ips"
}
# service_diag: what decides a ClusterIP connection, per node, into $diag (kept after the run): the
# EndpointSlices, the demo pods' probe transitions, the nat rules of the demo Service, REJECT rules, the
# conntrack entries to the ClusterIP, the routes.
diag=$repo/_output/vm/service-diag.txt
service_diag() {
	local cip=$1 n
	mkdir -p "${diag%/*}"
	{
		echo "== endpoints (ip:ready:serving:node)"
		demo_endpoints
		k get pods -l app.kubernetes.io/name=demo -o wide
		for n in "${names[@]}"; do
			echo "== $n: probe transitions of the demo pods"
			gssh "$n" "journalctl -u nodekit-agent -u nodekit-server --no-pager -o cat | grep 'probe result changed' | grep 'pod=default/demo' | tail -n 20"
			echo "== $n: iptables-save (nat and filter rules of the demo Service, REJECT and DROP rules)"
			gssh "$n" "iptables-save | grep -E 'default/demo|REJECT|DROP|^\*|MASQUERADE'"
			echo "== $n: conntrack to $cip"
			gssh "$n" "conntrack -L -d $cip 2>&1 | tail -n 20"
			echo "== $n: routes"
			gssh "$n" ip route
		done
	} >"$diag" 2>&1
	echo "diagnostics in $diag"
}
check_service() {
	local cip n rc=0
	cip=$(k get svc demo -o jsonpath='{.spec.clusterIP}')
	# From a settled state: every demo pod Ready and listed ready, as a client would wait for.
	await "the demo pods Ready and their endpoints ready" demo_pods_ready || { demo_endpoints; return 1; }
	echo "endpoints $(demo_endpoints | tr '\n' ' ')"
	for n in "${names[@]}"; do
		five_answers "$n" gssh "$n" curl -sS --max-time 10 "http://$cip/" || rc=1
	done
	five_answers "a pod on agent1" in_pod agent1 curl -sS --max-time 10 "http://$cip/" || rc=1
	if [ $rc -ne 0 ]; then
		echo "endpoints after: $(demo_endpoints | tr '\n' ' ')"
		service_diag "$cip"
	fi
	return $rc
}
check_cgroup_limits() {
	local node=${names[-1]} cid cpid cg mem cpu
	k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: vm-limits
  namespace: default
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 1
  containers:
  - name: demo
    image: nodekit.local/demo-server:v1
    imagePullPolicy: IfNotPresent
    resources:
      limits: {cpu: 250m, memory: 96Mi}
YAML
	k wait --for=condition=Ready pod/vm-limits --timeout "${timeout}s" >/dev/null || { k describe pod vm-limits | tail -n 15; return 1; }
	cid=$(k get pod vm-limits -o jsonpath='{.status.containerStatuses[0].containerID}')
	cid=${cid#*://}
	cpid=$(gssh "$node" "nodekit crictl inspect -o go-template --template '{{.info.pid}}' $cid")
	cg=$(gssh "$node" cat "/proc/$cpid/cgroup")
	[[ $cg == 0::/* ]] || { echo "not a cgroup v2 process: $cg"; return 1; }
	cg=${cg#0::}
	mem=$(gssh "$node" cat "/sys/fs/cgroup$cg/memory.max")
	cpu=$(gssh "$node" cat "/sys/fs/cgroup$cg/cpu.max")
	echo "$node: $cg memory.max=$mem cpu.max=$cpu"
	k delete pod vm-limits --wait=false >/dev/null
	[ "$mem" = 100663296 ] && [ "$cpu" = "25000 100000" ]
}
lease_epoch() {
	date -d "$(k get lease -n kube-node-lease "$1" -o jsonpath='{.spec.renewTime}')" +%s
}
lease_after() { [ "$(lease_epoch "$1")" -gt "$2" ]; }
# all_demo_ready NODE: the node has at least one demo pod and all of them are Ready.
all_demo_ready() {
	local got
	got=$(pods_on "$1")
	[ -n "$got" ] && ! awk '$4 != "true" {bad=1} END {exit !bad}' <<<"$got"
}
check_agent_restart() {
	local node=agent1 before after t
	before=$(pods_on $node | awk '{print $1, $3, $5}' | sort)
	[ -n "$before" ] || { echo "no demo pod on $node"; return 1; }
	t=$(date +%s)
	gssh $node systemctl restart nodekit-agent
	await "$node's lease renewed after the restart" lease_after $node "$t" || return 1
	await "$node's demo pods Ready" all_demo_ready $node || return 1
	after=$(pods_on $node | awk '{print $1, $3, $5}' | sort)
	if [ "$before" != "$after" ]; then
		echo "pods changed: before [$before] after [$after]"
		return 1
	fi
	echo "$(wc -l <<<"$after") pods on $node kept their containers, restarts unchanged ($(awk '{print $2}' <<<"$after" | sort -u | tr '\n' ' '))"
}
check_journal() {
	local lines starts
	lines=$(gssh agent1 journalctl -u nodekit-agent --no-pager -o cat | wc -l)
	# One invocation id per start of the unit: the first start and the restart above at least. The
	# ids are read from the unit's own entries (-F lists a field's values over the whole journal,
	# whatever the matches, so it would count every unit's starts).
	starts=$(gssh agent1 journalctl _SYSTEMD_UNIT=nodekit-agent.service --no-pager -o export |
		grep -a '^_SYSTEMD_INVOCATION_ID=' | sort -u | wc -l)
	echo "journalctl -u nodekit-agent: $lines lines from $starts starts of the unit"
	[ "$lines" -gt 0 ] && [ "$starts" -ge 2 ]
}
boot_id() { gssh "$1" cat /proc/sys/kernel/random/boot_id; }
new_boot() { local b; b=$(boot_id "$1") && [ "$b" != "$2" ]; }
check_reboot() {
	local node=${names[-1]} b t
	b=$(boot_id "$node")
	t=$(date +%s)
	gssh "$node" systemctl reboot || true
	await "$node back after the reboot" new_boot "$node" "$b" || return 1
	await "$node's lease renewed after the reboot" lease_after "$node" "$t" || return 1
	await "$node Ready" all_ready || return 1
	if [ "$node" != server ]; then
		await "$node's demo pods Ready again" all_demo_ready "$node" || { pods_on "$node"; return 1; }
	fi
	echo "$node rebooted (boot id $b -> $(boot_id "$node")), Ready with $(pods_on "$node" | wc -l) demo pods Ready"
}

# kubelet_e2e NODE: the kubelet's cgroup v2 e2e tests (built on the host with `go test -c`, passed in over
# the share) in NODE, with the images of `make images`: both drivers' subtests must pass, not skip.
check_kubelet_cgroupv2() {
	local node=agent1 out
	[ -x "$repo/_output/vm/kubelet.test" ] || { echo "no $repo/_output/vm/kubelet.test: make vm-test builds it"; return 1; }
	out=$(gssh "$node" "cd /tmp && NODEKIT_TEST_IMAGES=/nodekit/_output/images NODEKIT_TEST_START_TIMEOUT=10m /nodekit/_output/vm/kubelet.test \
		-test.run '^TestCgroupV2PodCgroups\$' -test.v -test.count=1 -test.timeout 30m 2>&1") || true
	printf '%s\n' "$out" >"$run/kubelet-cgroupv2.log"
	grep -E '^ *--- (PASS|FAIL|SKIP)' <<<"$out" | sed -E 's/^ *--- //'
	if ! grep -qE '^ *--- PASS: TestCgroupV2PodCgroups/cgroupfs ' <<<"$out" ||
		! grep -qE '^ *--- PASS: TestCgroupV2PodCgroups/systemd ' <<<"$out" ||
		! grep -qE '^--- PASS: TestCgroupV2PodCgroups ' <<<"$out"; then
		grep -E -- '(_test\.go:[0-9]+|FAIL|panic)' <<<"$out" | head -n 20
		return 1
	fi
}
# pod_route NODE CIDR: NODE's nodekit host-gw route (proto 78, cni/routes) to CIDR, "CIDR via GW".
pod_route() { gssh "$1" ip -4 route show proto 78 | awk -v d="$2" '$1 == d {print $1, $2, $3}'; }
no_pod_route() { local r; r=$(pod_route "$1" "$2") && [ -z "$r" ]; }
check_node_delete_routes() {
	local gone=${names[-1]} cidr n r others=()
	cidr=$(k get node "$gone" -o jsonpath='{.spec.podCIDR}')
	[ -n "$cidr" ] || { echo "$gone has no podCIDR"; return 1; }
	for n in "${names[@]}"; do
		[ "$n" = "$gone" ] && continue
		others+=("$n")
		r=$(pod_route "$n" "$cidr")
		[ "$r" = "$cidr via ${ip[$gone]}" ] || { echo "$n has no route '$cidr via ${ip[$gone]}' before: $(gssh "$n" ip route | tr '\n' ';')"; return 1; }
	done
	k delete node "$gone" --wait=true >/dev/null
	for n in "${others[@]}"; do
		await "$n's route to $gone's $cidr removed" no_pod_route "$n" "$cidr" || { echo "$n still has: $(pod_route "$n" "$cidr")"; return 1; }
	done
	echo "Node $gone deleted: the route '$cidr via ${ip[$gone]}' is gone from ${others[*]}"
}

check "nodes Ready" check_nodes_ready
check "demo Deployment spread over both agents" check_demo_spread
check "pod-to-pod across VMs" check_pod_to_pod
check "demo Service from every node and from a pod" check_service
check "cgroup v2 cpu/memory limits" check_cgroup_limits
check "systemctl restart nodekit-agent: 0 pod restarts" check_agent_restart
check "journalctl -u nodekit-agent" check_journal
check "guest reboot brings the node back" check_reboot
check "kubelet cgroup v2 e2e (TestCgroupV2PodCgroups) in a guest" check_kubelet_cgroupv2
check "a deleted Node's host-gw routes are removed" check_node_delete_routes

for n in "${names[@]}"; do
	say "$n: qemu peak RSS $(awk '/VmHWM/ {printf "%d MiB", $2/1024}' "/proc/${pid[$n]}/status")"
done
say "${#passed[@]} passed, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}; total $((SECONDS - t_start)) s"
[ ${#failed[@]} -eq 0 ]
