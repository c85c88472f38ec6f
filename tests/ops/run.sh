#!/bin/bash
# usage: tests/ops/run.sh KUPDATE — the operator-facing parts: kupdate check
# against this host, the man pages, the bash completion (TAP; each script's
# own plan line is left out, a script that fails without saying so gets a
# failing line).
set -u
k=$1 dir=$(dirname "$0") rc=0
for s in check-host output man completion install layers; do
	[ -x "$dir/$s.sh" ] || continue
	echo "# $s"
	out=$("$dir/$s.sh" "$k" 2>&1)
	st=$?
	echo "$out" | grep -v '^1\.\.[0-9]*$'
	if [ $st != 0 ] && ! echo "$out" | grep -q '^not ok'; then
		echo "not ok - $s exited with status $st"
	fi
	[ $st = 0 ] || rc=1
done
exit $rc
