#!/bin/bash
# usage: tests/fuzz/run.sh [--tap] FUZZ_BUILD SECONDS
# Runs each fuzz target over its regression inputs (tests/fuzz/regress/T/:
# inputs that once crashed it), then fuzzes it for SECONDS from the seed
# corpus plus what earlier runs found ($FUZZ_BUILD/corpus/T).  Prints runs,
# time and crashes per target (with --tap, as TAP).  Exit 1 on a crash.
set -u
tap=0
[ "${1:-}" = --tap ] && { tap=1; shift; }
fb=$1 secs=$2
src=$(cd "$(dirname "$0")" && pwd)
targets="images manifest"
[ $tap = 1 ] && echo "1..4"
n=0 rc=0
report() { # ok? text
	n=$((n + 1))
	if [ $tap = 1 ]; then
		if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
	else
		echo "fuzz: $2"
	fi
	[ "$1" = 0 ] || rc=1
}
for t in $targets; do
	bin=$fb/bin/fuzz-$t
	reg=$src/regress/$t
	mkdir -p "$fb/corpus/$t" "$fb/crashes/$t"
	# regressions: each input once
	if ls "$reg"/* >/dev/null 2>&1; then
		out=$("$bin" -runs=1 "$reg"/* 2>&1)
		st=$?
		[ $st = 0 ] || echo "$out" | tail -30 | sed 's/^/# /'
		report $st "fuzz-$t: $(ls "$reg" | wc -l) regression inputs"
	else
		report 0 "fuzz-$t: no regression inputs"
	fi
	log=$fb/fuzz-$t.log
	"$bin" -max_total_time="$secs" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$fb/crashes/$t/" -print_final_stats=1 \
		"$fb/corpus/$t" "$fb/seeds/$t" >"$log" 2>&1
	st=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	crashes=$(ls "$fb/crashes/$t" | wc -l)
	[ $st = 0 ] || grep -E 'ERROR|SUMMARY|^#[0-9]+ .*in ' "$log" | head -20 | sed 's/^/# /'
	report $st "fuzz-$t: ${runs:-?} runs in ${took:-$secs} s, ${cov:-cov ?}, $crashes crash inputs in $fb/crashes/$t"
done
exit $rc
