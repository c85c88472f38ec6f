#!/bin/bash
# Build the busybox initramfs guest used for fast kernel tests.
#
# usage: initramfs/build.sh OUT.cpio.gz KQ_AGENT [ROOTFS_DIR]
#
# busybox (static, from busybox-static) as /init = busybox init with
# initramfs/inittab: rcS mounts the basics, configures eth0 for QEMU user
# networking, mounts the payload disk (/dev/vdb) on /payload, runs the
# early-boot hooks (/etc/kupdate/hooks.d/*.sh, /payload/hooks.d/*.sh), then
# init respawns kq-agent.  With ROOTFS_DIR (the Debian guest's root), its
# kexec binary and the libraries it needs are copied in.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT KQ_AGENT [ROOTFS_DIR]}
agent=${2:?usage: build.sh OUT KQ_AGENT [ROOTFS_DIR]}
rootfs=${3:-}
bb=/bin/busybox

# ldd fails on a static binary
if ldd "$bb" >/dev/null 2>&1; then
	echo "initramfs: $bb is not static (install busybox-static)" >&2
	exit 1
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,etc/init.d,etc/kupdate/hooks.d,proc,sys,dev,tmp,run,payload,root,var}
cp "$bb" "$stage/bin/busybox"
for p in $("$bb" --list-full); do
	[ -e "$stage/$p" ] || ln -s /bin/busybox "$stage/$p"
done
ln -sfn /bin/busybox "$stage/init"
install -m 755 "$agent" "$stage/sbin/kq-agent"
install -m 755 "$here/rcS" "$stage/etc/init.d/rcS"
install -m 644 "$here/inittab" "$stage/etc/inittab"
echo 'root::0:0:root:/root:/bin/sh' >"$stage/etc/passwd"
echo 'root:x:0:' >"$stage/etc/group"

if [ -n "$rootfs" ]; then
	kexec=$(cd "$rootfs" && ls usr/sbin/kexec sbin/kexec 2>/dev/null | head -1)
	[ -n "$kexec" ] || { echo "initramfs: no kexec in $rootfs" >&2; exit 1; }
	rm -f "$stage/sbin/kexec" "$stage/usr/sbin/kexec"
	install -D -m 755 "$rootfs/$kexec" "$stage/sbin/kexec"
	# its shared libraries, resolved inside the guest root
	for lib in $(chroot "$rootfs" ldd "/$kexec" | grep -o '/[^ ]*'); do
		mkdir -p "$stage/$(dirname "$lib")"
		cp -L "$rootfs/$lib" "$stage/$lib"
	done
fi

mkdir -p "$(dirname "$out")"
(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | gzip -1) >"$out.tmp"
mv "$out.tmp" "$out"
echo "[initramfs] $out ($(du -h "$out" | cut -f1))" >&2
