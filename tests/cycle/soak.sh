#!/bin/bash
# The soak: N update cycles in a row in QEMU, alternating kernels A (6.1)
# and B (6.12), with five preserved units (demo-counter, demo-pipe, demo-log,
# demo-echo, redis-server) and three clients on the host that stay connected
# through all of them: the counter's client, a stream of numbered and
# checksummed records both ways through demo-echo, and a redis connection
# issuing INCR.  After every cycle: the kernel is the other one, every unit
# is active with the very processes it had at the start (same pids), the
# counter's memory checks out, the pipe lost nothing, `kupdate status` says
# every unit restored.  At the end, the tally:
#   cycles done, bytes checked, bytes lost (must be 0), resets (must be 0),
#   worst stall
# TAP: one line per cycle, then the clients' verdicts.  Not part of
# `make check` (a cycle takes 20-40 s under emulation): `make soak N=100`.
#
# usage: tests/cycle/soak.sh [N]     (default 100)
# Only one QEMU runs on this machine at a time: the script holds
# /tmp/kupdate-qemu.lock (flock) while it runs.
set -uo pipefail
. "$(dirname "$0")/../../qemu-kexec/qemu-lock.sh"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$top/qemu-kexec/vm
N=${1:-100}
case $N in '' | *[!0-9]*) echo "usage: $0 [N]" >&2 && exit 2 ;; esac
name=soak-$$
BOOT_TIMEOUT=${BOOT_TIMEOUT:-600}
payload=$BUILD/cycle-payload
work=$(mktemp -d /tmp/kupdate-soak.XXXXXX)
client_pid= stream_pid= redis_pid=
# shellcheck source=tests/cycle/lib.sh
. "$here/lib.sh"

run() { "$vm" run "$name" -t 300 -- "$@"; }
done_cycles=0
tally() {
	local checked=0 inflight=0 resets=0 stall=0 s c r
	s=$(grep '^summary' "$work/stream" 2>/dev/null | tail -1)
	if [ -n "$s" ]; then
		read -r _ _ checked _ inflight _ resets _ stall <<<"$s"
	else
		inflight=unknown
	fi
	# the counter client and redis: a closed or reset connection, and their
	# longest pause
	for f in client redis; do
		grep -q '^FAIL.*\(closed\|reset\|Connection\)' "$work/$f" 2>/dev/null && resets=$((resets + 1))
	done
	c=$(sed -n 's/.*longest-pause \([0-9.]*\) s.*/\1/p' "$work/client" 2>/dev/null)
	r=$(sed -n 's/.*longest pause \([0-9.]*\) s.*/\1/p' "$work/redis" 2>/dev/null)
	stall=$(printf '%s\n' "$stall" "${c:-0}" "${r:-0}" | sort -g | tail -1)
	echo "# soak: cycles done $done_cycles of $N, bytes checked $checked (each way, record stream)," \
		"bytes lost $inflight, resets $resets, worst stall $stall s"
	echo "# soak: downtime per cycle (kupdate status, longest unit): min ${dmin:-?} s, max ${dmax:-?} s"
}
finish() {
	for p in $client_pid $stream_pid $redis_pid; do kill "$p" 2>/dev/null; done
	"$vm" kill "$name" >/dev/null 2>&1
	tally
	[ "$failed" = 0 ] && rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	rm -rf "$work"
	echo "1..$n"
	exit $((failed > 0))
}
trap finish INT TERM
# a script that dies on an error (set -u) must not leave its VM running: it
# would hold the QEMU lock every later suite waits for
trap 'for p in ${client_pid:-} ${stream_pid:-} ${redis_pid:-}; do kill "$p" 2>/dev/null; done
	[ -n "${name:-}" ] && "$vm" kill "$name" >/dev/null 2>&1' EXIT

# ---- boot A, install, start the services ----------------------------------------
t0=$(now)
"$vm" start "$name" --guest debian --kernel A --payload "$payload" --timeout "$BOOT_TIMEOUT" \
	--fwd auto:8080 --fwd auto:7000 --fwd auto:6379 \
	2>"$work/start" || { sed 's/^/# /' "$work/start"; bail "boot kernel A"; }
"$vm" wait-running "$name" -t "$BOOT_TIMEOUT" >/dev/null 2>&1
say "boot A: $(since "$t0") s"
port=$(fwd 8080) port_echo=$(fwd 7000) port_redis=$(fwd 6379)
wait_payload || bail "the payload disk is not mounted in the guest"
run 'cp -a /payload/root/. / && systemctl daemon-reload &&
	systemctl enable --now demo-counter.service demo-pipe.service demo-log.service demo-echo.service &&
	systemctl enable kupdate-finish.service &&
	sed -i "s/^bind .*/bind 0.0.0.0/; s/^protected-mode yes/protected-mode no/" /etc/redis/redis.conf &&
	echo "save \"\"" >>/etc/redis/redis.conf &&
	systemctl restart redis-server.service' >"$work/out" 2>&1 ||
	{ sed 's/^/# /' "$work/out"; bail "install kupdate and the services in the guest"; }
units="demo-counter demo-pipe demo-log demo-echo redis-server"
nunits=5
check "kupdate enable: $nunits units preserved" \
	run "kupdate enable $(sed 's/\([^ ]*\)/\1.service/g' <<<"$units") >/dev/null &&
		test \$(ls /etc/systemd/system/kupdate.target.wants | wc -l) = $nunits"
sleep 3
declare -A pids
for u in $units; do pids[$u]=$(unit_pids $u.service); done
say "pids: $(for u in $units; do printf '%s: %s; ' $u "${pids[$u]}"; done)"

start_clients
sleep 5

# ---- N cycles --------------------------------------------------------------------
dmin= dmax=
for i in $(seq "$N"); do
	if [ $((i % 2)) = 1 ]; then
		k=B want='^6\.12\.' dir="A->B"
	else
		k=A want='^6\.1\.' dir="B->A"
	fi
	boot=$(boot_id)
	t0=$(now)
	"$vm" run "$name" -t 900 -- "kupdate apply /payload/boot/bzImage-$k" >"$work/apply" 2>&1
	rc=$?
	if [ "$rc" != 252 ] && [ "$rc" != 0 ]; then
		sed 's/^/# apply: /' "$work/apply"
		notok "cycle $i $dir: kupdate apply failed (exit $rc)"
		break
	fi
	new_boot "$boot" || bail "cycle $i $dir: the new kernel did not come up"
	took=$(since "$t0")
	bad=""
	rel=$(run 'uname -r')
	grep -q "$want" <<<"$rel" || bad="$bad kernel:$rel"
	for u in $units; do
		now_pids=$(unit_pids $u.service)
		[ "$now_pids" = "${pids[$u]}" ] || bad="$bad $u:pids(${now_pids:-none}!=${pids[$u]})"
	done
	c=$(query demo-counter check)
	grep -q "^ok [0-9]* ${pids[demo-counter]% }\$" <<<"$c" || bad="$bad counter:'$c'"
	p=$(query demo-pipe get)
	awk -v a="$p" 'BEGIN { split(a, x); exit !(x[6] == 0) }' || bad="$bad pipe:'$p'"
	status=$(run 'kupdate status')
	restored=$(grep -c ' restored ' <<<"$status")
	[ "$restored" = $nunits ] || bad="$bad restored:$restored"
	# the longest unit downtime of this cycle, as kupdate status reports it
	down=$(run 'kupdate status --json' | jq -r '[.units[].downtime_ns // 0] | max / 1e9 * 10 | round / 10')
	dmin=$(printf '%s\n' "${dmin:-$down}" "$down" | sort -g | head -1)
	dmax=$(printf '%s\n' "${dmax:-$down}" "$down" | sort -g | tail -1)
	for f in client stream redis; do
		grep -q '^FAIL' "$work/$f" && bad="$bad $f:$(grep '^FAIL' "$work/$f")"
	done
	if [ -z "$bad" ]; then
		ok "cycle $i $dir ($rel): $nunits units restored with their pids, memory and pipe intact, clients connected (apply to checked $took s, down $down s)"
		done_cycles=$i
	else
		notok "cycle $i $dir:$bad"
		echo "$status" | sed 's/^/# status: /'
		break
	fi
	[ $((i % 10)) = 0 ] && sed -n 's/^\(stream\|client\): /# /p' "$work/stream" "$work/client" | tail -2
done

# ---- the clients' verdicts ---------------------------------------------------------
touch "$work/stop"
for _ in $(seq 240); do
	kill -0 $client_pid 2>/dev/null || kill -0 $stream_pid 2>/dev/null || kill -0 $redis_pid 2>/dev/null || break
	sleep 0.5
done
wait $client_pid $stream_pid $redis_pid
client_pid= stream_pid= redis_pid=
for f in client stream redis; do grep '^PASS\|^FAIL\|^summary' "$work/$f" | sed "s/^/# $f: /"; done
check "the counter's client: no reset, no lost answer, the counter never ran while checkpointed" \
	grep -q '^PASS' "$work/client"
check "the record stream: every byte came back, in order, no reset" \
	grep -q '^summary checked [0-9]* in-flight 0 resets 0 ' "$work/stream"
check "redis: the held connection went on (INCR by one each), the keys are intact" \
	grep -q '^PASS' "$work/redis"
check "$done_cycles of $N cycles done" test "$done_cycles" = "$N"
finish
