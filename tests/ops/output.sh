#!/bin/bash
# usage: tests/ops/output.sh KUPDATE — machine-readable and terminal output:
# every --json is valid JSON of the documented shape, the dump progress
# shows on a terminal only (TAP).
set -u
k=$1
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
t=$(mktemp -d /tmp/kupdate-output-test.XXXXXX)
# kupdate dump's records (recover.c) stay with the test
export KUPDATE_RUN_DIR=$t/run
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$t"
}
trap cleanup EXIT

# no cycle, no preserved unit: still JSON
out=$(KUPDATE_STATE_DIR=$t/state "$k" status --json)
[ "$(echo "$out" | jq -c .)" = '{"cycle":null}' ] && ok "status --json without a cycle: {\"cycle\": null}" || nok "status --json without a cycle: $out"
mkdir -p "$t/wants"
out=$(KUPDATE_WANTS_DIR=$t/wants "$k" list --json)
[ "$(echo "$out" | jq -c .)" = '[]' ] && ok "list --json without units: []" || nok "list --json without units: $out"

# a tree of two processes of ours, 64 MiB in the parent; in a session of its
# own, as a service's main process is (a background job of this script would
# stay in the caller's process group, whose leader is not in the tree)
perl -e 'use POSIX (); POSIX::setsid(); $x = "k" x (64 << 20); if (fork) { sleep 120 } else { sleep 120 }' &
root=$!
pids+=("$root")
disown "$root"
for _ in $(seq 50); do [ -n "$(cat /proc/$root/task/$root/children 2>/dev/null)" ] && break; sleep 0.1; done
child=$(cat /proc/$root/task/$root/children | xargs)
pids+=($child)
sleep 0.5
TERM=xterm script -qec "$k dump -t $root -D $t/img --leave-running" /dev/null >"$t/tty" 2>&1
if grep -aq "dumping pid $root: 2/2 processes, " "$t/tty"; then
	ok "dump progress on a terminal: $(grep -ao "dumping pid $root: 2/2 processes[^)]*)" "$t/tty" | tail -1)"
else
	nok "no progress line on a terminal: $(tr -d '\033' <"$t/tty" | head -c 300)"
fi
rm -rf "$t/img"
"$k" dump -t "$root" -D "$t/img" --leave-running >"$t/pipe" 2>&1
rc=$?
[ $rc = 0 ] && ! grep -q "dumping" "$t/pipe" && ! grep -q $'\e' "$t/pipe" &&
	ok "no progress and no escape sequences into a pipe" || nok "dump into a pipe: rc $rc, $(head -c 300 "$t/pipe")"

"$k" show --json "$t/img" >"$t/show.json"
if jq -e --arg p "$root" '.["inventory.img"].records[0].root_pid == ($p | tonumber) and
	(.["pstree.img"].records | length) == 2 and
	([to_entries[] | select(.key | test("^pages-" + $p + "(\\.[0-9]+)?\\.img$")) | .value.nr_pages] | add) > 16384' "$t/show.json" >/dev/null; then
	ok "show --json: valid, root pid, 2 processes, the 64 MiB of pages"
else
	nok "show --json: $(head -c 300 "$t/show.json")"
fi
"$k" show "$t/img" >"$t/show.txt" 2>&1 && grep -q "pstree" "$t/show.txt" && ok "show as text" || nok "show as text"
# apply --store: a directory the images could not safely go to is refused
# before anything is looked at (no unit, no kernel needed)
out=$("$k" apply --store "$t/nostore" /nonexistent-vmlinuz 2>&1)
rc=$?
[ $rc = 2 ] && grep -q -- "--store $t/nostore: not a directory" <<<"$out" &&
	ok "apply --store on a missing directory: refused, naming it ($out)" || nok "apply --store missing: rc $rc, $out"
mkdir "$t/open" && chmod 0777 "$t/open"
out=$("$k" apply --store "$t/open" /nonexistent-vmlinuz 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "writable by no one else.*chmod 700" <<<"$out" &&
	ok "apply --store on a directory others can write: refused with the fix" || nok "apply --store 0777: rc $rc, $out"
echo "1..$n"
exit $failed
