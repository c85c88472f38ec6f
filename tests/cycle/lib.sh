# Helpers of the QEMU cycle scripts (cycle.sh, faults.sh, soak.sh, stock.sh), sourced by them.
# The script defines vm, name, work, BOOT_TIMEOUT, run (vm run with its own
# timeout) and finish (its own cleanup, then the TAP plan and exit status);
# start_clients needs BUILD and the forwarded ports.
# shellcheck shell=bash

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { # check "description" command...
	local d=$1
	shift
	if "$@"; then ok "$d"; else notok "$d"; fi
}
say() { echo "# $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
active() { [ "$(run "systemctl is-active $1")" = active ]; }
# the host's port QEMU forwards to the guest's port $1
fwd() { "$vm" info "$name" | sed -n 's/^fwd=//p' | tr ',' '\n' | sed -n "s/^\([0-9]*\):$1\$/\1/p"; }
bail() {
	notok "$*"
	echo "# last serial lines:"
	tail -40 "$("$vm" log "$name")" 2>/dev/null | sed 's/^/# serial: /'
	finish
}

boot_id() { "$vm" ping "$name" | cut -d' ' -f1; }
# the payload disk is mounted when udev has seen it (nofail: not waited for)
wait_payload() {
	run 'for i in $(seq 300); do test -d /payload/root && exit 0
		test -e /dev/disk/by-id/virtio-payload && mount /payload 2>/dev/null; sleep 0.2; done; exit 1'
}
# wait for a new boot after a command that kexecs
new_boot() { # new_boot OLD_BOOT_ID
	"$vm" ping "$name" -t "$BOOT_TIMEOUT" --not "$1" >/dev/null || return 1
	"$vm" wait-running "$name" -t "$BOOT_TIMEOUT" >"$work/state" 2>&1
	head -1 "$work/state" | grep -qx running || sed 's/^/# state: /' "$work/state"
	wait_payload
}
# kupdate apply ARGS in the guest (its output in $work/apply, printed), the
# check that it kexec'd and the wait for the new boot (bail without one, at
# once when apply failed);
# checks of what apply printed read $work/apply afterwards
apply_kexec() { # apply_kexec LABEL "APPLY ARGS"
	local b rc
	b=$(boot_id)
	"$vm" run "$name" -t 600 -- "kupdate apply $2" >"$work/apply" 2>&1
	rc=$?
	sed 's/^/# apply: /' "$work/apply"
	check "$1: kupdate apply kexecs (vm run exit $rc: 252 or 0)" test "$rc" = 252 -o "$rc" = 0
	# a failed apply kexecs nothing: no boot to wait for
	[ "$rc" = 252 ] || [ "$rc" = 0 ] || bail "$1: kupdate apply failed (exit $rc); no new kernel to wait for"
	new_boot "$b" || bail "$1: the new kernel did not come up"
}
unit_pids() { # every pid of a unit's cgroup, sorted
	run "cat /sys/fs/cgroup/system.slice/$1/cgroup.procs | sort -n | tr '\n' ' '"
}
# why_unit UNIT: what the guest says of a unit a check found wrong (its
# status line, its state, the end of its restore log and of its journal),
# printed under the failed check, where a CI excerpt shows it
why_unit() {
	run "kupdate status 2>&1 | grep -E '^(UNIT|$1) '; systemctl show -P ActiveState,SubState,MainPID $1 | xargs;
		tail -n 25 /run/kupdate/restore-$1.log 2>&1; journalctl -b -u $1 -o short-monotonic --no-hostname | tail -n 15" 2>&1 |
		sed "s/^/# $1: /"
}
# restored_check LABEL UNIT PIDS: the unit is active with exactly these
# processes; else why_unit tells what became of it
restored_check() {
	local now
	now=$(active "$2" && unit_pids "$2")
	check "$1: $2 restored with its processes" test "$now" = "$3"
	[ "$now" = "$3" ] || why_unit "$2"
}
query() { run "kupdate-demo query /run/$1.sock $2"; }
# the host's three clients, through QEMU's forwards to the guest's ports
# $port (counter), $port_echo (record stream) and $port_redis, until
# $work/stop appears; their verdicts go to $work/client, stream and redis
start_clients() {
	rm -f "$work/stop"
	"$BUILD/tests/cycle/demo-client" 127.0.0.1 "$port" "$work/stop" >"$work/client" 2>&1 &
	client_pid=$!
	# paced (stream.c): the host's cores also run the guest
	STREAM_RATE=${STREAM_RATE-4194304} "$BUILD/tests/cycle/stream-client" 127.0.0.1 "$port_echo" "$work/stop" >"$work/stream" 2>&1 &
	stream_pid=$!
	"$BUILD/tests/cycle/redis-client" 127.0.0.1 "$port_redis" "$work/stop" >"$work/redis" 2>&1 &
	redis_pid=$!
}
