#!/bin/bash
# usage: tests/fuzz/mkcorpus.sh KUPDATE CR_BINDIR MKSEED OUTDIR
# The seed corpus of the fuzz targets, from real dumps: a few of the C/R
# tests (tests/cr) are dumped and restored by crrun --keep, and mkseed turns
# each first image directory into a raw and a wrapped seed; plus a manifest.
set -eu
kupdate=$1 bindir=$2 mkseed=$3 out=$4
mkdir -p "$out/images" "$out/manifest"
n=0
for t in loop tree pipes unixsk eventfd signalfd timerfd epoll inotify memfd ghost locks \
	fsshare pty threads orphans; do
	log=$("$bindir/crrun" --keep --kupdate "$kupdate" "$bindir/$t" 2>&1) || true
	wd=$(echo "$log" | sed -n 's/^# work directory kept: //p' | tail -1)
	if [ -n "$wd" ] && [ -d "$wd/img-0" ]; then
		"$mkseed" images "$wd/img-0" "$out/images" "$t" && n=$((n + 1))
	else
		echo "mkcorpus: no images from $t" >&2
	fi
	# only what crrun made for us
	case "$wd" in /tmp/crtest.*) rm -rf "$wd" ;; esac
done
"$mkseed" manifest "$out/manifest"
echo "mkcorpus: seeds from $n dumps in $out"
[ "$n" -gt 0 ]
