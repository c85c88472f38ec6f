#!/bin/sh
# Install the Debian packages a part of kupdate needs, only those missing.
# usage: tools/deps.sh GROUP...   (groups: build test kernel guest fuzz deb fleet)
# Fast when everything is present: one dpkg-query, no network.
set -eu

pkgs_build="build-essential pkg-config protobuf-c-compiler libprotobuf-c-dev libnl-3-dev libnftables-dev
 libnl-route-3-dev libnl-genl-3-dev libsystemd-dev zlib1g-dev liblzma-dev libzstd-dev libjson-c-dev"
pkgs_test="libcmocka-dev libssl-dev perl clang-format iproute2 nftables jq bsdutils groff-base man-db"
pkgs_kernel="ccache bc bison flex libelf-dev libssl-dev cpio xz-utils kmod patch
 linux-source-6.1 linux-source-6.12"
pkgs_guest="qemu-system-x86 qemu-utils debootstrap busybox-static e2fsprogs cpio
 zstd ca-certificates openssh-client"
pkgs_fuzz="clang libclang-rt-14-dev"
# building the Debian package (tests/ops/deb.sh); its Build-Depends are
# the build group
pkgs_deb="debhelper dpkg-dev fakeroot jq"
# the Ansible rolling update of docs/fleet.md, run on QEMU guests
pkgs_fleet="ansible-core"

want=""
for g in "$@"; do
	eval "p=\${pkgs_$g:-}"
	[ -n "$p" ] || { echo "deps.sh: unknown group '$g'" >&2; exit 2; }
	want="$want $p"
done

missing=""
for p in $want; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages:$missing; run as root (or: apt-get install$missing)" >&2
	exit 1
fi
echo "deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
