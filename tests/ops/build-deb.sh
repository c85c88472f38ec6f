#!/bin/bash
# usage: tests/ops/build-deb.sh OUTDIR — `dpkg-buildpackage -us -uc -b` on a
# copy of the work tree (tracked and new files, no build outputs) in a
# temporary directory, since dpkg-buildpackage writes into the parent of the
# source; the .deb lands in OUTDIR, its path on stdout, the log in
# OUTDIR/build.log.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
t=$(mktemp -d /tmp/kupdate-debbuild.XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir "$t/kupdate"
(cd "$top" && git ls-files -co --exclude-standard -z | grep -zv '^build/' |
	xargs -0 tar cf - --no-recursion) | tar xf - -C "$t/kupdate"
if ! (cd "$t/kupdate" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	echo "build-deb: dpkg-buildpackage failed, see $out/build.log" >&2
	exit 1
fi
cp "$t"/kupdate_*_amd64.deb "$out/"
ls "$out"/kupdate_*_amd64.deb | tail -1
