#!/bin/bash
# usage: tests/unit/run.sh BINARY...   — cmocka tests as TAP; a binary that
# dies (a sanitizer report, a crash) yields a failing line of its own.
rc=0
for t in "$@"; do
	out=$(CMOCKA_MESSAGE_OUTPUT=TAP "$t" 2>&1)
	st=$?
	echo "$out" | grep -v '^1\.\.[0-9]*$'
	if [ $st != 0 ] && ! echo "$out" | grep -q '^not ok'; then
		echo "not ok - $(basename "$t") exited with status $st"
	fi
	[ $st = 0 ] || rc=1
done
exit $rc
