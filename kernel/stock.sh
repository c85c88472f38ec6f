#!/bin/bash
# Download Debian's kernel packages the stock cycle installs in its guest
# (kernel/stock/kernels) into $KUPDATE_CACHE/stock, once: a package already
# there (its name and version in the file name) is not fetched again.  apt
# fetches them from the mirror of the host's own apt sources; when the
# host's package lists do not know one, they are updated once.
#
# usage: kernel/stock.sh [DIR]   prints the directory that holds the .debs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KUPDATE_CACHE=${KUPDATE_CACHE:-/var/cache/kupdate}
dir=${1:-$KUPDATE_CACHE/stock}
list=$here/stock/kernels
log() { printf '[stock] %s\n' "$*" >&2; }

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
updated=false
for pkg in $(sed 's/#.*//' "$list"); do
	if compgen -G "$dir/${pkg}_*.deb" >/dev/null; then
		continue
	fi
	if ! apt-cache show "$pkg" >/dev/null 2>&1 && ! $updated; then
		log "the host's package lists do not know $pkg: apt-get update"
		apt-get update -qq >&2 || { log "apt-get update failed"; exit 1; }
		updated=true
	fi
	tmp=$(mktemp -d "$dir/.get.XXXXXX")
	chown _apt "$tmp" 2>/dev/null || true # apt downloads as its own user
	log "downloading $pkg"
	if ! (cd "$tmp" && apt-get download -q "$pkg" >&2); then
		rm -rf "$tmp"
		log "cannot download $pkg (is it still in the archive? kernel/stock/kernels names it)"
		exit 1
	fi
	mv "$tmp"/*.deb "$dir/"
	rm -rf "$tmp"
done
# packages the list no longer names go
for f in "$dir"/*.deb; do
	[ -e "$f" ] || continue
	n=$(basename "$f")
	grep -qx "${n%%_*}" <(sed 's/#.*//; /^$/d' "$list") || rm -f "$f"
done
echo "$dir"
