#!/usr/bin/env bash
# Builds the Debian 12 guest image of the VM test leg (hack/vm/run.sh, `make vm-test`) from Debian's
# packages, and caches it under $NODEKIT_VM_CACHE (default /var/cache/nodekit/vm):
#
#   base.raw           ext4 root file system (sparse, $NODEKIT_VM_DISK_SIZE, default 8G), made by
#                      `mkfs.ext4 -d` from a `debootstrap --variant=minbase bookworm` tree
#   vmlinuz, initrd.img  the guest's kernel and initramfs (qemu boots them with -kernel/-initrd)
#   id_ed25519         the key root logs in with over ssh (the test's only way to run commands)
#   stamp              sha256 of the inputs; a rerun with the same inputs does nothing
#
# The guest has systemd as PID 1 (cgroup v2), systemd-networkd (its address comes from the kernel
# command line's ip=, see run.sh), openssh-server, a 9p mount of the host checkout at /nodekit (as
# Vagrant's synced folder), and every package hack/install-deps.sh installs, preinstalled at build
# time: the guests have no route to a Debian mirror, so install.sh's dependency step finds them present.
# Packages come from the first Debian mirror of the host's apt sources (or $NODEKIT_VM_MIRROR).
# Needs root, debootstrap, e2fsprogs and ssh-keygen. Takes ~3-5 min on 2 cores; prints the cache dir.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${NODEKIT_VM_CACHE:-/var/cache/nodekit/vm}
size=${NODEKIT_VM_DISK_SIZE:-8G}
suite=bookworm

die() {
	echo "vm/image.sh: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap and mkfs need it)"
for c in debootstrap mkfs.ext4 ssh-keygen; do
	command -v "$c" >/dev/null || die "$c not found (apt-get install debootstrap e2fsprogs openssh-client)"
done

mirror=${NODEKIT_VM_MIRROR:-}
if [ -z "$mirror" ]; then
	# The first http(s) Debian mirror of the host's apt sources, deb822 (URIs:) or one-line (deb URL).
	mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		sed -nE 's#^(URIs:|deb)[[:space:]]+(\[[^]]*\][[:space:]]+)?(https?://[^[:space:]]*/debian)/?([[:space:]].*)?$#\3#p' | head -n1 || true)
	[ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources*: set NODEKIT_VM_MIRROR"
fi

# The guest's own packages, then what install-deps.sh would install on a node.
base=(systemd systemd-sysv udev dbus linux-image-amd64 iproute2 iptables kmod procps openssh-server ca-certificates)
mapfile -t deps < <("$here/../install-deps.sh" --list)

stamp=$( {
	echo "$suite $mirror $size"
	printf '%s\n' "${base[@]}" "${deps[@]}"
	cat "${BASH_SOURCE[0]}"
} | sha256sum | cut -d' ' -f1)
if [ -s "$cache/base.raw" ] && [ "$(cat "$cache/stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "$cache"
	exit 0
fi

mkdir -p "$cache"
rm -f "$cache/stamp"
[ -s "$cache/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C nodekit-vm-test -f "$cache/id_ed25519"
work=$(mktemp -d "$cache/build.XXXXXX")
root=$work/rootfs
cleanup() {
	for m in proc sys dev/pts dev; do
		mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
	done
	rm -rf "$work"
}
trap cleanup EXIT

t0=$SECONDS
echo "vm/image.sh: debootstrap $suite from $mirror" >&2
debootstrap --variant=minbase --include="$(
	IFS=,
	echo "${base[*]}"
)" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -n 30 "$work/debootstrap.log" >&2
	die "debootstrap failed"
}

# install-deps.sh's packages, with the dependencies apt resolves; no service starts in the chroot.
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
echo "deb $mirror $suite main" >"$root/etc/apt/sources.list"
echo "vm/image.sh: apt-get install ${deps[*]}" >&2
chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
	"apt-get update -qq && apt-get install -y -qq --no-install-recommends $(printf '%s ' "${deps[@]}")" \
	>"$work/apt.log" 2>&1 || {
	tail -n 30 "$work/apt.log" >&2
	die "apt-get install in the guest tree failed"
}
chroot "$root" apt-get clean
rm -f "$root/usr/sbin/policy-rc.d"
for m in dev/pts dev sys proc; do umount "$root/$m"; done

# The guest's configuration: root on the virtio disk, the checkout over 9p, the address from ip=.
cat >"$root/etc/fstab" <<'FSTAB'
/dev/vda  /         ext4  defaults,errors=remount-ro  0 1
nodekit   /nodekit  9p    trans=virtio,version=9p2000.L,msize=262144,nofail  0 0
FSTAB
mkdir -p "$root/nodekit"
printf '9p\n9pnet_virtio\n' >"$root/etc/modules-load.d/nodekit-vm.conf"
: >"$root/etc/hostname"
printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
# No DNS server exists on the test network; CoreDNS forwards to it and gets no answer.
printf 'nameserver 192.0.2.1\n' >"$root/etc/resolv.conf"
chroot "$root" systemctl enable systemd-networkd.service systemd-network-generator.service ssh.service >/dev/null 2>&1
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$cache/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
mkdir -p "$root/etc/ssh/sshd_config.d"
printf 'PermitRootLogin prohibit-password\nUseDNS no\n' >"$root/etc/ssh/sshd_config.d/nodekit-vm.conf"
# A serial console that needs no password would let anyone on the host in: keep getty off ttyS0.
chroot "$root" systemctl mask serial-getty@ttyS0.service >/dev/null 2>&1
# Each VM gets its machine id from the kernel command line (systemd.machine_id=).
: >"$root/etc/machine-id"

cp -L "$root/vmlinuz" "$work/vmlinuz"
cp -L "$root/initrd.img" "$work/initrd.img"
rm -f "$work/base.raw"
truncate -s "$size" "$work/base.raw"
mkfs.ext4 -q -F -L nodekit-vm -d "$root" "$work/base.raw"
mv "$work/vmlinuz" "$work/initrd.img" "$work/base.raw" "$cache/"
echo "$stamp" >"$cache/stamp"
echo "vm/image.sh: image built in $((SECONDS - t0)) s: $(du -sh --apparent-size "$cache/base.raw" | cut -f1) apparent, $(du -sh "$cache/base.raw" | cut -f1) used" >&2
echo "$cache"
