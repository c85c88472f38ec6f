#!/bin/bash
# usage: tests/ops/layers.sh KUPDATE — the engine's shape (tools/layers on
# the objects of this build): no file-level call cycle among the engine's
# files, no function over 150 lines, and an orchestrator that includes only
# the engine's public headers (cr-engine/include).  TAP.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
kupdate=$1
objdir=$(dirname "$(dirname "$kupdate")")/obj
cd "$root" || exit 1
out=$(tools/layers "$objdir" 2>&1)
st=$?
echo "1..3"
check() { # $1 pattern of the problem lines, $2 what is tested
	local bad
	bad=$(echo "$out" | grep -E "$1")
	if [ -z "$bad" ] && echo "$out" | grep -q '^layers: '; then
		echo "ok - $2"
	else
		echo "not ok - $2"
		echo "$out" | sed 's/^/# /'
	fi
}
check '^cycle of|^  |^include cycle' "the engine's files call each other, and its headers include each other, in no cycle"
check '\(\) is [0-9]+ lines' "no function of the engine or the orchestrator is over 150 lines"
check 'engine-internal header' "the orchestrator includes only cr-engine/include"
echo "# $(echo "$out" | tail -1)"
[ $st = 0 ]
