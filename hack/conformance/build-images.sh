#!/usr/bin/env bash
# Builds, from source, the test images the conformance suite pulls, as OCI image archives named as
# k8s.io/kubernetes/test/utils/image/manifest.go names them (the registries of its default
# RegistryList), into $CACHE/v$KUBE_VERSION/images. The lab's agents import every archive of their
# --images-dir at start, and the suite's pods use IfNotPresent for tagged images, so no registry is
# needed (see docs/conformance.md for why `nodekit registry` is not used here).
#
#   agnhost  k8s.io/kubernetes/test/images/agnhost (CGO_ENABLED=0, from build-tools.sh), plus
#            Debian's busybox-static applets and, where upstream's image has Alpine's tools, this
#            host's Debian bash (also as /bin/sh), curl, dig/nslookup/host, getent (glibc; the DNS specs getent hosts), nc (netcat-openbsd), ip and socat; 2.66.1,
#            and the same build under 2.55 (the previous tag, which image-update specs switch from)
#   busybox  Debian's busybox-static with its applet links, and this host's Debian bash as /bin/sh
#   pause    nodekit's images/pause, built as 3.10.2
#   nginx    Debian's nginx with the shared libraries it links, copied from the Debian packages
#            installed on this host (dynamically linked, unlike upstream's image)
#   glibc-dns-testing  busybox plus this host's Debian dig/nslookup/host and glibc's getent (upstream:
#            debian:bookworm-slim plus dnsutils)
#   nonroot  busybox run as user 1234 (upstream: alpine, USER 1234)
#   nonewprivs  k8s.io/kubernetes/test/images/nonewprivs's nnp (static Go), setuid root, on busybox
#   kitten, nautilus  agnhost serving its test-webserver with the image's page (the upstream html files)
# Host tools the images copy and that the host lacks (dig, nc, socat) are installed with apt-get.
# A rerun rebuilds only missing archives, and everything when this script changed (a stamp of it).
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

# Archives built by another version of this script are rebuilt.
stamp=$(sha256sum "$0" | cut -c1-16)
if [[ $(cat "$out/.stamp" 2>/dev/null) != "$stamp" ]]; then
	rm -f "$out"/*.tar
	echo "$stamp" >"$out/.stamp"
fi

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
# for each of its applets at the path Debian gives it (busybox --list-full) and in /bin, as in upstream's
# busybox image (the docker library one, every applet in /bin): the suite runs e.g. /bin/sysctl, which
# Debian has as /sbin/sysctl.
base_rootfs() {
	local d=$1
	rm -rf "$d" && mkdir -p "$d"/{bin,sbin,usr/bin,usr/sbin,etc,dev,proc,sys,root,home,var,tmp}
	chmod 1777 "$d/tmp"
	cp "$work/busybox-deb/bin/busybox" "$d/bin/busybox"
	local a
	for a in $("$d/bin/busybox" --list-full); do
		# -L too: a link made here points at /bin/busybox of the image, which -e looks for on the host.
		[[ -e $d/$a || -L $d/$a ]] || ln -s /bin/busybox "$d/$a"
		[[ -e $d/bin/${a##*/} || -L $d/bin/${a##*/} ]] || ln -s /bin/busybox "$d/bin/${a##*/}"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$d/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
}

# host_bins ROOT SPEC...: copies this host's program for each SPEC (a command name or path, with
# =DEST for another path in ROOT) into ROOT, replacing a busybox link there, and every shared library
# ldd lists for it (the host's copy from its Debian package, at its real path, with the linked name
# as a symlink), so the dynamically linked program runs in the image.
host_bins() {
	local d=$1 spec src dest lib real
	shift
	for spec in "$@"; do
		src=${spec%%=*} dest=${spec#*=}
		src=$(command -v "$src") || { log "this host has no ${spec%%=*}"; return 1; }
		[[ $spec == *=* ]] || dest=$src
		mkdir -p "$d$(dirname "$dest")"
		rm -f "$d$dest"
		cp "$(readlink -f "$src")" "$d$dest"
		# base_rootfs's /bin link of the busybox applet of that name leads to this program too.
		if [[ $(readlink "$d/bin/${dest##*/}") == /bin/busybox ]]; then
			ln -sf "$dest" "$d/bin/${dest##*/}"
		fi
		for lib in $(ldd "$src" | awk '/=> \//{print $3} /^\t\/lib/{print $1}'); do
			real=$(readlink -f "$lib")
			mkdir -p "$d$(dirname "$lib")" "$d$(dirname "$real")"
			[[ -e $d$real ]] || cp "$real" "$d$real"
			[[ $lib == "$real" ]] || ln -sf "$real" "$d$lib"
		done
	done
}

# The Debian tools the images copy from this host, installed when missing.
need=()
command -v dig >/dev/null || need+=(bind9-dnsutils)
command -v nc.openbsd >/dev/null || need+=(netcat-openbsd)
command -v socat >/dev/null || need+=(socat)
if ((${#need[@]})); then
	log "installing ${need[*]} (their programs go into the test images)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

ref=$e2e/busybox:1.37.0-2
if ! have "$ref"; then
	busybox_deb
	base_rootfs "$work/busybox"
	# Debian's busybox 1.35 sh drops environment entries whose names are not shell identifiers (a
	# ConfigMap key such as data-1 set as a variable) before running a command; upstream's busybox 1.37
	# keeps them, and the ConfigMap/Secret env specs print them with `sh -c env`. bash passes them on.
	host_bins "$work/busybox" bash=/bin/bash
	ln -sf bash "$work/busybox/bin/sh"
	"$mkimage" --rootfs "$work/busybox" --out "$out" --ref "$ref" --cmd sh --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		--source "debian:busybox-static $(dpkg-deb -f "$work"/debs/busybox-static_*.deb Version) + host debian bash as /bin/sh"
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
	cp -a "$work/nginx-deb/etc/nginx" "$d/etc/nginx"
	ln -s ../sites-available/default "$d/etc/nginx/sites-enabled/default" # what the package's postinst links
	mkdir -p "$d/usr/share/nginx" "$d/var/www/html" "$d/var/log/nginx" "$d/var/lib/nginx" "$d/run"
	cp -a "$work/nginx-deb/usr/share/nginx/html" "$d/usr/share/nginx/html"
	cp "$d/usr/share/nginx/html/index.html" "$d/var/www/html/index.html"
	ln -sf /dev/stdout "$d/var/log/nginx/access.log"
	ln -sf /dev/stderr "$d/var/log/nginx/error.log"
	echo 'www-data:x:33:33:www-data:/var/www:/bin/false' >>"$d/etc/passwd"
	echo 'www-data:x:33:' >>"$d/etc/group"
	host_bins "$d" "$work/nginx-deb/usr/sbin/nginx=/usr/sbin/nginx"
	"$mkimage" --rootfs "$d" --out "$out" --ref "$e2e/nginx:1.27.0-2" --ref "$e2e/nginx:1.28.0-2" \
		--entrypoint nginx --cmd -g --cmd "daemon off;" --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		--source "debian:nginx $(dpkg-deb -f "$work"/debs/nginx_*.deb Version) (dynamic; libraries from the host's Debian packages)"
fi
ref=$e2e/agnhost:2.66.1
src=$(go env GOMODCACHE)/k8s.io/kubernetes@v$KUBE_VERSION/test/images
if ! have "$ref" || ! have "$e2e/agnhost:2.55"; then
	busybox_deb
	d=$work/agnhost
	base_rootfs "$d"
	[[ -x $base/bin/agnhost ]] || { log "agnhost is not built: run build-tools.sh first"; exit 1; }
	cp "$base/bin/agnhost" "$d/agnhost"
	ln -s agnhost "$d/agnhost-2"
	ln -s agnhost "$d/agn"
	mkdir -p "$d/uploads"
	cp "$src/agnhost/porter/localhost.crt" "$src/agnhost/porter/localhost.key" "$d/"
	host_bins "$d" bash=/bin/bash curl dig nslookup host getent nc.openbsd=/usr/bin/nc ip=/sbin/ip socat
	# Debian's busybox-static runs its own applets before PATH (FEATURE_SH_STANDALONE): with it as
	# /bin/sh, `sh -c 'nc -v …'` would get busybox's nc, not the openbsd one. bash is the shell here.
	ln -sf bash "$d/bin/sh"
	echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$d/etc/passwd"
	printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$d/etc/group"
	printf 'hosts: files dns\n' >"$d/etc/nsswitch.conf"
	"$mkimage" --rootfs "$d" --out "$out" --ref "$ref" --ref "$e2e/agnhost:2.55" --entrypoint /agnhost --cmd pause \
		--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--source "k8s.io/kubernetes@v$KUBE_VERSION/test/images/agnhost + debian:busybox-static + host debian bash curl bind9-dnsutils libc-bin getent netcat-openbsd iproute2 socat (2.55 is the same build)"
fi

ref=$e2e/glibc-dns-testing:2.1.1
if ! have "$ref"; then
	busybox_deb
	d=$work/glibc-dns-testing
	base_rootfs "$d"
	host_bins "$d" bash=/bin/bash dig nslookup host getent
	ln -sf bash "$d/bin/sh" # not busybox's sh, which would run its nslookup applet (see agnhost)
	printf 'hosts: files dns\n' >"$d/etc/nsswitch.conf"
	"$mkimage" --rootfs "$d" --out "$out" --ref "$ref" --cmd sh --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		--source "debian:busybox-static + host debian bind9-dnsutils, libc-bin getent"
fi

ref=$e2e/nonroot:1.5
if ! have "$ref"; then
	busybox_deb
	base_rootfs "$work/nonroot"
	"$mkimage" --rootfs "$work/nonroot" --out "$out" --ref "$ref" --user 1234 --cmd sh --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		--source "debian:busybox-static, USER 1234"
fi

ref=$e2e/nonewprivs:1.4
if ! have "$ref"; then
	busybox_deb
	d=$work/nonewprivs
	base_rootfs "$d"
	mkdir -p "$d/usr/local/bin"
	rm -rf "$work/nnp-src" && mkdir -p "$work/nnp-src"
	cp "$src/nonewprivs/nnp.go" "$work/nnp-src/"
	printf 'module nnp\n\ngo 1.26\n' >"$work/nnp-src/go.mod"
	(cd "$work/nnp-src" && CGO_ENABLED=0 "$GO" build -trimpath -o "$d/usr/local/bin/nnp" .)
	chmod 4755 "$d/usr/local/bin/nnp"
	"$mkimage" --rootfs "$d" --out "$out" --ref "$ref" --cmd nnp --env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--source "k8s.io/kubernetes@v$KUBE_VERSION/test/images/nonewprivs (setuid root) + debian:busybox-static"
fi

# kitten and nautilus: upstream's are agnhost's test-webserver image with the html files added.
for img in kitten nautilus; do
	ref=$e2e/$img:1.8
	have "$ref" && continue
	d=$work/$img
	[[ -x $work/agnhost/agnhost ]] || { log "$img needs the agnhost tree of this script's run: remove $out/.stamp and rerun"; exit 1; }
	rm -rf "$d" && cp -a "$work/agnhost" "$d"
	cp "$src/$img/html/"* "$d/"
	"$mkimage" --rootfs "$d" --out "$out" --ref "$ref" --entrypoint /agnhost --cmd test-webserver \
		--env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--source "k8s.io/kubernetes@v$KUBE_VERSION/test/images/$img (html) on this script's agnhost image"
done

log "images in $out: $(cd "$out" && ls *.tar | tr '\n' ' ')"
