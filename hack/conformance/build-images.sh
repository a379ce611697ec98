#!/usr/bin/env bash
# Builds, from source, the test images the conformance suite pulls, as OCI image archives named as
# k8s.io/kubernetes/test/utils/image/manifest.go names them (the registries of its default
# RegistryList), into $CACHE/v$KUBE_VERSION/images. The lab's agents import every archive of their
# --images-dir at start, and the suite's pods use IfNotPresent for tagged images, so no registry is
# needed (see docs/conformance.md for why `nodekit registry` is not used here).
#
#   agnhost  k8s.io/kubernetes/test/images/agnhost (CGO_ENABLED=0, from build-tools.sh), plus
#            Debian's busybox-static applets for the shell and tools tests exec in it
#   busybox  Debian's busybox-static with its applet links
#   pause    nodekit's images/pause, built as 3.10.2
#   nginx    Debian's nginx with the shared libraries it links, copied from the Debian packages
#            installed on this host (dynamically linked, unlike upstream's image)
# A rerun rebuilds only missing archives.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
KUBE_VERSION=${KUBE_VERSION:-1.37.2}
CACHE=${CACHE:-/var/cache/nodekit/conformance}
GO=${GO:-go}
base=$CACHE/v$KUBE_VERSION
out=$base/images
work=$base/image-work
mkdir -p "$out" "$work"
log() { printf '%s conformance: %s\n' "$(date +%T)" "$*" >&2; }

e2e=registry.k8s.io/e2e-test-images
mkimage=$work/mkimage
(cd "$repo" && "$GO" build -o "$mkimage" ./hack/conformance/mkimage)

# have REF: is the archive of REF built?
archive() { local r=${1//\//_}; echo "$out/${r//:/-}.tar"; }
have() { [[ -s $(archive "$1") ]]; }

# Debian's busybox-static, unpacked once (apt-get download works offline from the package cache too).
busybox_deb() {
	if [[ ! -x $work/busybox-deb/bin/busybox ]]; then
		log "fetching Debian busybox-static"
		rm -rf "$work/busybox-deb" && mkdir -p "$work/debs"
		(cd "$work/debs" && apt-get download busybox-static >/dev/null)
		dpkg-deb -x "$work"/debs/busybox-static_*.deb "$work/busybox-deb"
	fi
}

# base_rootfs DIR: the directories and account files a container expects, and busybox with a link
# for each of its applets (busybox --list-full gives their paths).
base_rootfs() {
	local d=$1
	rm -rf "$d" && mkdir -p "$d"/{bin,sbin,usr/bin,usr/sbin,etc,dev,proc,sys,root,home,var,tmp}
	chmod 1777 "$d/tmp"
	cp "$work/busybox-deb/bin/busybox" "$d/bin/busybox"
	local a
	for a in $("$d/bin/busybox" --list-full); do
		[[ -e $d/$a ]] || ln -s /bin/busybox "$d/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$d/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
}

ref=$e2e/busybox:1.37.0-2
if ! have "$ref"; then
	busybox_deb
	base_rootfs "$work/busybox"
	"$mkimage" --rootfs "$work/busybox" --out "$out" --ref "$ref" --cmd sh --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		--source "debian:busybox-static $(dpkg-deb -f "$work"/debs/busybox-static_*.deb Version)"
fi

ref=registry.k8s.io/pause:3.10.2
if ! have "$ref"; then
	rm -rf "$work/pause" && mkdir -p "$work/pause"/{dev,etc,proc,sys}
	(cd "$repo" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w -X main.version=3.10.2" -o "$work/pause/pause" ./images/pause)
	"$mkimage" --rootfs "$work/pause" --out "$out" --ref "$ref" --entrypoint /pause --source github.com/nodekit/nodekit/images/pause
fi

# nginx: Debian's package and, for each shared library the binary needs (ldd), the host's copy from
# the Debian package that ships it; the default site on port 80, as upstream's test image serves.
if ! have "$e2e/nginx:1.27.0-2" || ! have "$e2e/nginx:1.28.0-2"; then
	log "packing Debian nginx"
	d=$work/nginx
	rm -rf "$d" "$work/nginx-deb" && mkdir -p "$work/debs"
	(cd "$work/debs" && rm -f nginx_*.deb nginx-common_*.deb && apt-get download nginx nginx-common >/dev/null)
	dpkg-deb -x "$work"/debs/nginx_*.deb "$work/nginx-deb"
	dpkg-deb -x "$work"/debs/nginx-common_*.deb "$work/nginx-deb"
	busybox_deb
	base_rootfs "$d"
	cp -a "$work/nginx-deb/usr/sbin/nginx" "$d/usr/sbin/nginx"
	cp -a "$work/nginx-deb/etc/nginx" "$d/etc/nginx"
	ln -s ../sites-available/default "$d/etc/nginx/sites-enabled/default" # what the package's postinst links
	mkdir -p "$d/usr/share/nginx" "$d/var/www/html" "$d/var/log/nginx" "$d/var/lib/nginx" "$d/run"
	cp -a "$work/nginx-deb/usr/share/nginx/html" "$d/usr/share/nginx/html"
	cp "$d/usr/share/nginx/html/index.html" "$d/var/www/html/index.html"
	ln -sf /dev/stdout "$d/var/log/nginx/access.log"
	ln -sf /dev/stderr "$d/var/log/nginx/error.log"
	echo 'www-data:x:33:33:www-data:/var/www:/bin/false' >>"$d/etc/passwd"
	echo 'www-data:x:33:' >>"$d/etc/group"
	for lib in $(ldd "$d/usr/sbin/nginx" | awk '/=> \//{print $3} /^\t\/lib/{print $1}'); do
		real=$(readlink -f "$lib")
		mkdir -p "$d$(dirname "$lib")" "$d$(dirname "$real")"
		cp "$real" "$d$real"
		[[ $lib == "$real" ]] || ln -sf "$real" "$d$lib"
	done
	"$mkimage" --rootfs "$d" --out "$out" --ref "$e2e/nginx:1.27.0-2" --ref "$e2e/nginx:1.28.0-2" \
		--entrypoint nginx --cmd -g --cmd "daemon off;" --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		--source "debian:nginx $(dpkg-deb -f "$work"/debs/nginx_*.deb Version) (dynamic; libraries from the host's Debian packages)"
fi
ref=$e2e/agnhost:2.66.1
if ! have "$ref"; then
	busybox_deb
	base_rootfs "$work/agnhost"
	[[ -x $base/bin/agnhost ]] || { log "agnhost is not built: run build-tools.sh first"; exit 1; }
	cp "$base/bin/agnhost" "$work/agnhost/agnhost"
	ln -s agnhost "$work/agnhost/agn"
	"$mkimage" --rootfs "$work/agnhost" --out "$out" --ref "$ref" --entrypoint /agnhost \
		--env PATH=/usr/sbin:/usr/bin:/sbin:/bin --source "k8s.io/kubernetes@v$KUBE_VERSION/test/images/agnhost + debian:busybox-static"
fi

log "images in $out: $(cd "$out" && ls *.tar | tr '\n' ' ')"
