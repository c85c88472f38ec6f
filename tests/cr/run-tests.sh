#!/bin/bash
# usage: tests/cr/run-tests.sh KUPDATE BINDIR [EXCLUDE-NAME-REGEX [ONLY-NAME-REGEX]]
# Runs the checkpoint/restore tests of tests/cr/tests.list (or $CR_TESTS_LIST)
# with the given kupdate binary; prints TAP.
set -u -f # no globbing: the options hold shell patterns (--expect-images)
kupdate=$1 bindir=$2 exclude=${3:-} only=${4:-}
list=${CR_TESTS_LIST:-$(dirname "$0")/tests.list}
mapfile -t lines < <(grep -v '^\s*#' "$list" | grep -v '^\s*$' |
	if [ -n "$exclude" ]; then grep -Ev "^($exclude)"; else cat; fi |
	if [ -n "$only" ]; then grep -E "^($only)"; else cat; fi)
echo "1..${#lines[@]}"
n=0
for line in "${lines[@]}"; do
	n=$((n + 1))
	name=$(echo "${line%%|*}" | xargs)
	rest=${line#*|}
	opts=$(echo "${rest%%|*}" | xargs)
	prog=$(echo "${rest#*|}" | xargs)
	# shellcheck disable=SC2086
	# a --peer program is one of ours too
	opts=$(echo "$opts" | sed "s|--peer \([a-z]\)|--peer $bindir/\1|")
	out=$("$bindir/crrun" --kupdate "$kupdate" $opts $bindir/$prog 2>&1)
	rc=$?
	if [ $rc = 0 ]; then
		echo "ok $n - $name"
	elif [ $rc = 77 ]; then
		echo "ok $n - $name # SKIP"
	else
		echo "not ok $n - $name"
	fi
	[ -n "$out" ] && echo "$out" | sed 's/^[^#]/# &/'
done
