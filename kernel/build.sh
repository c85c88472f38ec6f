#!/bin/bash
# Build one guest kernel: unpack Debian's linux-source-<version> tarball under
# $BUILD/kernel/<version>/src, apply kernel/patches/<version>/series, merge
# kernel/config/qemu-guest.config (+ qemu-guest-<version>.config) onto
# tinyconfig, check that every option stuck, build bzImage with ccache.
#
# usage: kernel/build.sh [--config-only] [--print-dir] VERSION    (6.1 | 6.12 | 6.1+fix1)
#
# A VERSION of the form BASE+VARIANT (6.1+fix1: kernel A' of the cycle test)
# is BASE's tarball, fragments and series, then kernel/patches/BASE+VARIANT/series
# on top: the same kernel version with a patch more.
#
# The result is cached in $KUPDATE_CACHE/kernels/<key>/ (bzImage, config,
# System.map, release), <key> being a hash of the tarball's package version,
# the fragments, the patch series and this script; a cached kernel is reused
# without unpacking anything.  $BUILD/kernel/<version>/bzImage and .../release
# point at the cached files.  --print-dir prints the cache dir and exits 0 if
# the kernel is already built (1 otherwise), building nothing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
KUPDATE_CACHE=${KUPDATE_CACHE:-/var/cache/kupdate}
JOBS=${JOBS:-2}

config_only=0 print_dir=0
while [ $# -gt 1 ]; do
	case $1 in
	--config-only) config_only=1 ;;
	--print-dir) print_dir=1 ;;
	*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
ver=${1:?usage: kernel/build.sh [--config-only] [--print-dir] VERSION}
base=${ver%%+*}
tarball=/usr/src/linux-source-$base.tar.xz
frags=("$here/config/qemu-guest.config")
[ -f "$here/config/qemu-guest-$base.config" ] && frags+=("$here/config/qemu-guest-$base.config")
pdirs=("$here/patches/$base")
[ "$ver" != "$base" ] && pdirs+=("$here/patches/$ver")
[ -f "${pdirs[-1]}/series" ] || { echo "build.sh: no patch series ${pdirs[-1]}/series" >&2; exit 2; }

log() { printf '[kernel %s] %s\n' "$ver" "$*" >&2; }

# ---- cache key -------------------------------------------------------------
key_input() {
	echo "tarball $(dpkg-query -W -f='${Version}' "linux-source-$base" 2>/dev/null || true) $(stat -c %s "$tarball")"
	echo "gcc $(gcc -dumpfullversion)"
	sha256sum "${frags[@]}" "$here/build.sh" | sed "s| $top/| |"
	for pdir in "${pdirs[@]}"; do
		[ -f "$pdir/series" ] || continue
		sha256sum "$pdir/series" | sed "s| $top/| |"
		sed '/^\s*#/d' "$pdir/series" | while read -r p _; do
			[ -n "$p" ] && sha256sum "$pdir/$p" | sed "s| $top/| |"
		done
	done
}
[ -f "$tarball" ] || { log "missing $tarball (tools/deps.sh kernel installs linux-source-$ver)"; exit 1; }
key=$(key_input | sha256sum | cut -c1-16)
cdir=$KUPDATE_CACHE/kernels/$ver-$key
out=$BUILD/kernel/$ver

publish() {
	mkdir -p "$out"
	ln -sfn "$cdir/bzImage" "$out/bzImage"
	ln -sfn "$cdir/config" "$out/config"
	cp "$cdir/release" "$out/release"
	echo "$cdir" >"$out/cache-dir"
}

if [ -f "$cdir/bzImage" ] && [ $config_only = 0 ]; then
	[ $print_dir = 1 ] && { echo "$cdir"; exit 0; }
	publish
	log "cached: $cdir ($(cat "$cdir/release"))"
	exit 0
fi
[ $print_dir = 1 ] && { echo "$cdir"; exit 1; }

# one build per version at a time (parallel make of several suites)
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -f "$cdir/bzImage" ] && [ $config_only = 0 ]; then
	publish
	log "cached (built meanwhile): $cdir"
	exit 0
fi

# ---- source tree -----------------------------------------------------------
src=$out/src
if [ "$(cat "$src/.kupdate-key" 2>/dev/null)" != "$key" ]; then
	log "unpacking $tarball"
	rm -rf "$src"
	mkdir -p "$src"
	tar -xJf "$tarball" -C "$src" --strip-components=1
	for pdir in "${pdirs[@]}"; do
		[ -f "$pdir/series" ] || continue
		sed '/^\s*#/d' "$pdir/series" | while read -r p _; do
			[ -n "$p" ] || continue
			log "applying $p"
			patch -d "$src" -p1 --forward --quiet <"$pdir/$p"
		done
	done
	echo "$key" >"$src/.kupdate-key"
fi

# ---- configuration ---------------------------------------------------------
kmake() { make -C "$src" -s "$@"; }
log "configuring: tinyconfig + ${frags[*]##*/}"
kmake tinyconfig >/dev/null
(cd "$src" && KCONFIG_CONFIG=.config scripts/kconfig/merge_config.sh -m .config "${frags[@]}" >/dev/null)
kmake olddefconfig >/dev/null

bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*)
		grep -qxF -- "$line" "$src/.config" || {
			log "option did not stick: $line (have: $(grep -E "^(# )?${line%%=*}[= ]" "$src/.config" || echo unset))"
			bad=1
		} ;;
	"# CONFIG_"*" is not set")
		sym=${line#\# }
		sym=${sym%% *}
		if grep -q "^$sym=" "$src/.config"; then
			log "option did not stick: $line (have: $(grep "^$sym=" "$src/.config"))"
			bad=1
		fi ;;
	esac
done < <(cat "${frags[@]}")
[ $bad = 0 ] || { log "configuration check failed"; exit 1; }
log "configuration check passed"
[ $config_only = 1 ] && exit 0

# ---- build -----------------------------------------------------------------
export CCACHE_DIR=${CCACHE_DIR:-$KUPDATE_CACHE/ccache}
mkdir -p "$CCACHE_DIR"
ccache -M 5G >/dev/null 2>&1 || true
export KBUILD_BUILD_USER=kupdate KBUILD_BUILD_HOST=kupdate
export KBUILD_BUILD_TIMESTAMP="$(date -u -d @0)"
start=$(date +%s)
log "building bzImage (-j$JOBS, ccache in $CCACHE_DIR)"
if ! make -C "$src" -j"$JOBS" CC="ccache gcc" bzImage >"$out/build.log" 2>&1; then
	tail -40 "$out/build.log" >&2
	log "build failed (full log: $out/build.log)"
	exit 1
fi
log "built in $(($(date +%s) - start)) s"

mkdir -p "$KUPDATE_CACHE/kernels"
tmp=$(mktemp -d "$KUPDATE_CACHE/kernels/.tmp.XXXXXX")
cp "$src/arch/x86/boot/bzImage" "$tmp/bzImage"
cp "$src/.config" "$tmp/config"
cp "$src/System.map" "$tmp/System.map"
kmake kernelrelease >"$tmp/release"
key_input >"$tmp/key-input"
chmod 755 "$tmp"
rm -rf "$cdir"
mv "$tmp" "$cdir"
publish
log "cached: $cdir ($(cat "$cdir/release"))"
