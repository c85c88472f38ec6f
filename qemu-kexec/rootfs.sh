#!/bin/bash
# Build the Debian guest root filesystem image for the QEMU harness.
#
# usage: qemu-kexec/rootfs.sh AGENT_BINARY
#
# Two cached stages under $KUPDATE_CACHE/rootfs/:
#   base-<key>/root   debootstrap --variant=minbase bookworm with
#                     qemu-kexec/guest/packages, boot-time savings applied;
#                     key = package list + this script (~2-3 min cold)
#   machine-<key>/root  debootstrap --variant=minbase bookworm with
#                     qemu-kexec/guest/machine-packages: the systemd-nspawn
#                     machine (issue 31), a booted Debian of its own; key =
#                     its package list + build_machine (~1.5 min cold)
#   image-<key>.img   base + kq-agent + qemu-kexec/guest/overlay + the
#                     machine at /var/lib/machines/mach1 as an ext4 image
#                     (mkfs.ext4 -d, seconds); key = base and machine keys +
#                     agent + overlay
#   stock-<key>.img   with STOCK_DEBS (Debian kernel packages): the image
#                     with them installed by dpkg (build_stock), and
#                     stock-<key>.boot their vmlinuz and initrd; key = image
#                     key + the packages' file names
# $BUILD/qemu/rootfs.img and $BUILD/qemu/rootfs-base point at them (and
# rootfs-stock.img, stock-boot).  The
# harness boots a throwaway qcow2 overlay, never the cached image itself.
# The Debian mirror is the one the host's apt sources use for bookworm.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
KUPDATE_CACHE=${KUPDATE_CACHE:-/var/cache/kupdate}
agent=${1:?usage: rootfs.sh AGENT_BINARY}
SUITE=bookworm
IMG_SIZE=${IMG_SIZE:-2G}

log() { printf '[rootfs] %s\n' "$*" >&2; }

pkglist() { sed 's/#.*//' "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }
packages=$(pkglist "$here/guest/packages")
machine_packages=$(pkglist "$here/guest/machine-packages")

mirror() {
	local m
	m=$(apt-get indextargets --format '$(REPO_URI) $(CODENAME) $(COMPONENT) $(LABEL)' 2>/dev/null |
		awk -v s="$SUITE" '$2 == s && $3 == "main" && $4 == "Debian" { print $1; exit }')
	if [ -z "$m" ]; then
		log "no $SUITE main source in the host's apt sources"
		return 1
	fi
	echo "$m"
}

# bootstrap DIR PACKAGES WHAT: debootstrap --variant=minbase of $SUITE
# with PACKAGES into DIR/root (its log DIR/debootstrap.log)
bootstrap() {
	local m
	m=$(mirror)
	log "debootstrap $SUITE for $3 (minbase + ${2// /,})"
	mkdir -p "$KUPDATE_CACHE/debootstrap-debs"
	if ! debootstrap --variant=minbase --include="${2// /,}" \
		--cache-dir="$KUPDATE_CACHE/debootstrap-debs" \
		"$SUITE" "$1/root" "$m" >"$1/debootstrap.log" 2>&1; then
		tail -30 "$1/debootstrap.log" >&2
		log "debootstrap of $3 failed (log: $1/debootstrap.log)"
		return 1
	fi
}

# size: no docs, manuals, locales or package lists
slim() {
	chroot "$1" apt-get clean
	rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/info/* \
		"$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin
	find "$1/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias \
		-exec rm -rf {} + 2>/dev/null || true
}

build_base() {
	local tmp root start
	start=$(date +%s)
	tmp=$(mktemp -d "$KUPDATE_CACHE/rootfs/.base.XXXXXX")
	root=$tmp/root
	bootstrap "$tmp" "$packages" "the guest" || return 1

	# identity, login (root without password on the serial console), hosts
	echo kupdate-guest >"$root/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\tkupdate-guest\n::1\tlocalhost\n' >"$root/etc/hosts"
	chroot "$root" passwd -d root >/dev/null
	chroot "$root" systemd-machine-id-setup >/dev/null 2>&1 || true
	# kexec-tools must not load a kernel by itself on shutdown
	printf 'LOAD_KEXEC=false\nUSE_GRUB_CONFIG=false\n' >"$root/etc/default/kexec"

	# boot-time savings (reference/NOTES.md): units a test guest does not need
	local u
	for u in e2scrub_all.timer e2scrub_reap.service apt-daily.timer apt-daily-upgrade.timer \
		dpkg-db-backup.timer fstrim.timer getty@tty1.service serial-getty@ttyS0.service \
		getty.target systemd-journal-flush.service kexec-load.service kexec.service \
		modprobe@.service systemd-modules-load.service systemd-networkd.service \
		systemd-networkd-wait-online.service systemd-hwdb-update.service \
		systemd-journal-catalog-update.service ldconfig.service systemd-binfmt.service \
		systemd-firstboot.service systemd-pstore.service sys-kernel-debug.mount \
		sys-kernel-tracing.mount sys-kernel-config.mount sys-fs-fuse-connections.mount \
		dev-hugepages.mount proc-sys-fs-binfmt_misc.automount \
		systemd-update-utmp-runlevel.service man-db.timer; do
		ln -sfn /dev/null "$root/etc/systemd/system/$u"
	done
	ln -sfn /lib/systemd/system/multi-user.target "$root/etc/systemd/system/default.target"
	# services a test starts itself, not every boot (their units as shipped)
	systemctl --root="$root" disable apache2.service apache-htcacheclean.service \
		mariadb.service ssh.service >/dev/null 2>&1 || true

	slim "$root"
	echo "$SUITE $packages" >"$tmp/packages"
	rm -rf "$base"
	mv "$tmp" "$base"
	log "base built in $(($(date +%s) - start)) s: $base ($(du -sh "$base/root" | cut -f1))"
}

# The nspawn machine: a debootstrap root as an operator makes one for
# /var/lib/machines, the units a container does not need masked (the
# same boot-time savings as the guest's), no password for root.  The
# service the cycle test runs inside is installed at test time.
build_machine() {
	local tmp root u
	tmp=$(mktemp -d "$KUPDATE_CACHE/rootfs/.machine.XXXXXX")
	root=$tmp/root
	bootstrap "$tmp" "$machine_packages" "the nspawn machine" || return 1
	chroot "$root" passwd -d root >/dev/null
	echo mach1 >"$root/etc/hostname"
	rm -f "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"
	: >"$root/etc/machine-id"
	for u in e2scrub_all.timer e2scrub_reap.service apt-daily.timer apt-daily-upgrade.timer \
		dpkg-db-backup.timer fstrim.timer man-db.timer systemd-journal-flush.service \
		systemd-hwdb-update.service systemd-journal-catalog-update.service \
		ldconfig.service systemd-firstboot.service; do
		ln -sfn /dev/null "$root/etc/systemd/system/$u"
	done
	slim "$root"
	rm -rf "$machine"
	mv "$tmp" "$machine"
	log "machine built: $machine ($(du -sh "$machine/root" | cut -f1))"
}

build_image() {
	local stage tmp
	stage=$(mktemp -d "$KUPDATE_CACHE/rootfs/.stage.XXXXXX")
	# hard-linked copy: only new files are added, nothing is modified in place
	cp -al "$base/root" "$stage/root"
	install -D -m 755 "$agent" "$stage/root/usr/local/sbin/kq-agent"
	cp -r --remove-destination "$here/guest/overlay/." "$stage/root/"
	mkdir -p "$stage/root/payload"
	local w=$stage/root/etc/systemd/system
	mkdir -p "$w/sysinit.target.wants" "$w/multi-user.target.wants" "$w/network-online.target.wants"
	ln -sfn ../kupdate-agent.service "$w/sysinit.target.wants/kupdate-agent.service"
	ln -sfn ../kupdate-net.service "$w/multi-user.target.wants/kupdate-net.service"
	ln -sfn ../kupdate-net.service "$w/network-online.target.wants/kupdate-net.service"
	mkdir -p "$stage/root/var/lib/machines"
	cp -al "$machine/root" "$stage/root/var/lib/machines/mach1"
	tmp=$img.tmp.$$
	rm -f "$tmp"
	mkfs.ext4 -q -F -L kupdate-root -d "$stage/root" "$tmp" "$IMG_SIZE" >/dev/null
	rm -rf "$stage"
	mv "$tmp" "$img"
	log "image built: $img"
}

# The stock cycle's image (STOCK_DEBS: Debian kernel packages): the image
# with those kernels installed by dpkg in a chroot, their initrds made by
# initramfs-tools as on the machine a cloud image is built on (seconds
# here; minutes each under the emulator), and their /boot files beside it
# for QEMU to boot the first one.  A private mount namespace holds the
# chroot's /proc and goes with it.
build_stock() {
	local stage tmp d
	stage=$(mktemp -d "$KUPDATE_CACHE/rootfs/.stock.XXXXXX")
	cp -a "$base/root" "$stage/root"
	install -D -m 755 "$agent" "$stage/root/usr/local/sbin/kq-agent"
	cp -r --remove-destination "$here/guest/overlay/." "$stage/root/"
	mkdir -p "$stage/root/payload" "$stage/root/tmp/debs"
	local w=$stage/root/etc/systemd/system
	mkdir -p "$w/sysinit.target.wants" "$w/multi-user.target.wants" "$w/network-online.target.wants"
	ln -sfn ../kupdate-agent.service "$w/sysinit.target.wants/kupdate-agent.service"
	ln -sfn ../kupdate-net.service "$w/multi-user.target.wants/kupdate-net.service"
	ln -sfn ../kupdate-net.service "$w/network-online.target.wants/kupdate-net.service"
	for d in $STOCK_DEBS; do cp "$d" "$stage/root/tmp/debs/"; done
	log "installing $(cd "$stage/root/tmp/debs" && ls | xargs) with dpkg in the image"
	if ! unshare -m --propagation private sh -c 'mount -t proc proc "$1/proc" &&
		chroot "$1" sh -c "dpkg -i /tmp/debs/*.deb"' sh "$stage/root" >"$stage/dpkg.log" 2>&1; then
		tail -20 "$stage/dpkg.log" >&2
		rm -rf "$stage"
		log "dpkg -i of the stock kernels failed"
		return 1
	fi
	rm -rf "$stage/root/tmp/debs"
	mkdir -p "$stage/boot"
	cp "$stage/root"/boot/vmlinuz-* "$stage/root"/boot/initrd.img-* "$stage/boot/"
	tmp=$stock_img.tmp.$$
	rm -f "$tmp"
	mkfs.ext4 -q -F -L kupdate-root -d "$stage/root" "$tmp" "$IMG_SIZE" >/dev/null
	rm -rf "$stock_boot"
	mv "$stage/boot" "$stock_boot"
	mv "$tmp" "$stock_img"
	rm -rf "$stage"
	log "stock image built: $stock_img (boot files in $stock_boot)"
}

# keys: each stage's inputs, including the text of the function that builds it
base_key=$( (echo "$SUITE $packages"; declare -f build_base bootstrap slim) | sha256sum | cut -c1-16)
base=$KUPDATE_CACHE/rootfs/base-$base_key
machine_key=$( (echo "$SUITE $machine_packages"; declare -f build_machine bootstrap slim) |
	sha256sum | cut -c1-16)
machine=$KUPDATE_CACHE/rootfs/machine-$machine_key
img_key=$( (echo "$base_key $machine_key"; declare -f build_image; sha256sum <"$agent"
	cd "$here/guest/overlay" && find . -type f | LC_ALL=C sort | xargs sha256sum) |
	sha256sum | cut -c1-16)
img=$KUPDATE_CACHE/rootfs/image-$img_key.img
if [ -n "${STOCK_DEBS:-}" ]; then
	stock_key=$( (echo "$img_key"; declare -f build_stock; for d in $STOCK_DEBS; do basename "$d"; done) |
		sha256sum | cut -c1-16)
	stock_img=$KUPDATE_CACHE/rootfs/stock-$stock_key.img
	stock_boot=$KUPDATE_CACHE/rootfs/stock-$stock_key.boot
fi
mkdir -p "$KUPDATE_CACHE/rootfs" "$BUILD/qemu"

# one builder at a time (parallel make of several suites, several trees)
exec 9>"$KUPDATE_CACHE/rootfs/.lock"
flock 9
if [ ! -d "$base/root" ]; then
	build_base
fi
if [ ! -d "$machine/root" ]; then
	build_machine
fi
if [ ! -f "$img" ]; then
	build_image
fi
if [ -n "${STOCK_DEBS:-}" ] && [ ! -f "$stock_img" ]; then
	build_stock
fi
# keep the cache from growing: entries unused for 3 days go (a running VM
# keeps its backing image open, so removing it under one is harmless)
touch "$base" "$machine" "$img"
[ -n "${STOCK_DEBS:-}" ] && touch "$stock_img" "$stock_boot"
find "$KUPDATE_CACHE/rootfs" -maxdepth 1 \( -name 'base-*' -o -name 'machine-*' -o -name 'image-*' -o -name 'stock-*' \) -mtime +3 \
	-exec rm -rf {} + 2>/dev/null || true
if [ -n "${STOCK_DEBS:-}" ]; then
	ln -sfn "$stock_img" "$BUILD/qemu/rootfs-stock.img"
	ln -sfn "$stock_boot" "$BUILD/qemu/stock-boot"
	log "ready: $BUILD/qemu/rootfs-stock.img -> $stock_img"
fi
ln -sfn "$img" "$BUILD/qemu/rootfs.img"
ln -sfn "$base/root" "$BUILD/qemu/rootfs-base"
log "ready: $BUILD/qemu/rootfs.img -> $img"
