#!/bin/bash
# usage: tests/ops/deb-cycle.sh [GUESTS]   (default 2)
#
# The Debian package in use, and the per-machine part of a rolling update
# (docs/fleet.md), in QEMU: the kupdate .deb is built (build-deb.sh) and,
# one guest after the other (serial: 1), on a fresh Debian guest running
# kernel A:
#   install   dpkg -i the .deb; the files are where the package says,
#             kupdate-finish.service is enabled, the generator is in place
#   pre       kupdate check (must say a cycle can run), kupdate check on the
#             new kernel's image, the demo counter enabled and kupdate list
#             saying it can be checkpointed
#   update    kupdate apply /payload/boot/bzImage-B (the guest kexecs)
#   post      the new kernel runs, kupdate status --json says every unit
#             restored, the counter has the same pid and went on counting
# A guest whose post-checks fail stops the roll: the next is not updated.
# Every QEMU run holds /tmp/kupdate-qemu.lock (one QEMU on this machine at a
# time).  TAP.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$top/qemu-kexec/vm
guests=${1:-2}
[ "$guests" = --one ] && guests=1
BOOT_TIMEOUT=${BOOT_TIMEOUT:-300}
work=$(mktemp -d /tmp/kupdate-debcycle.XXXXXX)
name=
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() {
	local d=$1
	shift
	if "$@"; then ok "$d"; else notok "$d"; fi
}
say() { echo "# $*"; }
jqe() { jq -e "$@" >/dev/null; }
run() { "$vm" run "$name" -t 120 -- "$@"; }
finish() {
	[ -n "$name" ] && "$vm" kill "$name" >/dev/null 2>&1
	[ -n "$name" ] && [ "$failed" = 0 ] && rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	rm -rf "$work"
	echo "1..$n"
	exit $((failed > 0))
}
trap finish INT TERM

# ---- the package and the payload --------------------------------------------------
build_payload() {
t0=$(date +%s)
deb=$("$here/build-deb.sh" "$work/payload") || {
	notok "build the .deb: $(tail -5 "$work/payload/build.log")"
	finish
}
ok "built $(basename "$deb") in $(($(date +%s) - t0)) s"
mkdir -p "$work/payload/extra"
cp "$BUILD/tests/cycle/kupdate-demo" "$work/payload/extra/" &&
	cp "$top/tests/cycle/units/demo-counter.service" "$work/payload/extra/" ||
	{
		notok "demo service for the payload (make build/tests/cycle/kupdate-demo)"
		finish
	}
}
[ "${1:-}" = --one ] || build_payload

wait_payload() {
	run 'for i in $(seq 300); do test -f /payload/extra/kupdate-demo && exit 0
		test -e /dev/disk/by-id/virtio-payload && mount /payload 2>/dev/null; sleep 0.2; done; exit 1'
}

# one machine: 0 if it was updated and is healthy
update_one() {
	local g=$1 boot rel_b out rc pid0 n0 pid1 n1
	name=debcyc-$$-$g
	say "---- machine $g: $name"
	"$vm" start "$name" --guest debian --kernel A --payload "$work/payload" \
		--timeout "$BOOT_TIMEOUT" 2>"$work/start" || {
		sed 's/^/# /' "$work/start"
		notok "$name: boot kernel A"
		return 1
	}
	"$vm" wait-running "$name" -t "$BOOT_TIMEOUT" >/dev/null 2>&1
	wait_payload || {
		notok "$name: payload disk mounted"
		return 1
	}

	# install
	out=$(run "dpkg -i /payload/$(basename "$deb")" 2>&1)
	check "$name: dpkg -i $(basename "$deb")" test $? = 0 || {
		echo "$out" | tail -10 | sed 's/^/# /'
		return 1
	}
	check "$name: package files in place" run 'test -x /usr/sbin/kupdate &&
		test "$(readlink /lib/systemd/system-generators/kupdate-generator)" = /usr/sbin/kupdate &&
		test -f /lib/systemd/system/kupdate.target &&
		test -f /usr/share/man/man8/kupdate.8.gz &&
		test -f /usr/share/bash-completion/completions/kupdate &&
		test -x /usr/share/initramfs-tools/scripts/init-top/kupdate'
	check "$name: kupdate-finish.service enabled by the package" \
		test "$(run 'systemctl is-enabled kupdate-finish.service')" = enabled
	check "$name: the completion loads in the guest's bash" \
		test "$(run "bash -c 'source /usr/share/bash-completion/completions/kupdate;
			COMP_WORDS=(kupdate ch); COMP_CWORD=1; _kupdate; echo \${COMPREPLY[*]}'")" = check

	# pre-checks, as the playbook's
	run 'kupdate check' >"$work/check-$g.txt" 2>&1
	rc=$?
	sed 's/^/# check: /' "$work/check-$g.txt" | grep -Ev '^# check:   ok ' | head -20
	check "$name: kupdate check on kernel A: a cycle can run (exit $rc)" test $rc = 0
	run 'kupdate check --json /payload/boot/bzImage-B' >"$work/checkB-$g.json" 2>/dev/null
	rc=$?
	check "$name: kupdate check bzImage-B: IKCONFIG read, pid_reserve patch, exit $rc" \
		jqe '.target.config_source == "IKCONFIG" and .target.pid_reserve_patch == true and
			.cycle_possible == true' "$work/checkB-$g.json"
	rel_b=$(jq -r .target.release "$work/checkB-$g.json")
	out=$(run 'cp /payload/extra/kupdate-demo /usr/local/bin/ &&
		cp /payload/extra/demo-counter.service /etc/systemd/system/ &&
		systemctl daemon-reload && systemctl start demo-counter.service &&
		kupdate enable demo-counter.service' 2>&1)
	check "$name: demo-counter started and preserved (kupdate enable)" test $? = 0 ||
		echo "$out" | sed 's/^/# /'
	sleep 1
	run 'kupdate list --json' >"$work/list-$g.json" 2>&1
	check "$name: kupdate list --json: demo-counter can be checkpointed" \
		jqe '.[] | select(.unit == "demo-counter.service") | .checkpointable == true' \
		"$work/list-$g.json"
	read -r n0 pid0 <<<"$(run 'kupdate-demo query /run/demo-counter.sock get')"
	say "counter before: $n0 (pid $pid0)"

	# the update
	boot=$("$vm" ping "$name" | cut -d' ' -f1)
	"$vm" run "$name" -t 600 -- 'kupdate apply /payload/boot/bzImage-B' >"$work/apply-$g" 2>&1
	rc=$?
	check "$name: kupdate apply kexecs (vm run exit $rc: 252 or 0)" test "$rc" = 252 -o "$rc" = 0 ||
		sed 's/^/# apply: /' "$work/apply-$g"
	"$vm" ping "$name" -t "$BOOT_TIMEOUT" --not "$boot" >/dev/null || {
		notok "$name: the new kernel boots"
		return 1
	}
	"$vm" wait-running "$name" -t "$BOOT_TIMEOUT" >"$work/state-$g" 2>&1
	wait_payload

	# post-checks (health), as the playbook's
	check "$name: running $rel_b" test "$(run 'uname -r')" = "$rel_b"
	run 'kupdate status --json' >"$work/status-$g.json" 2>&1
	check "$name: kupdate status --json: every unit restored" \
		jqe '.units | length > 0 and all(.result == "restored")' "$work/status-$g.json" ||
		sed 's/^/# status: /' "$work/status-$g.json"
	read -r n1 pid1 <<<"$(run 'kupdate-demo query /run/demo-counter.sock get')"
	say "counter after: $n1 (pid $pid1)"
	check "$name: the counter kept its pid and went on ($n0 -> $n1)" \
		test "$pid1" = "$pid0" -a "${n1:-0}" -gt "${n0:-0}"
	check "$name: systemd tracks the restored main pid" \
		test "$(run 'systemctl show -p MainPID --value demo-counter.service')" = "$pid0"
	say "phases: $(jq -c .phases_ns "$work/status-$g.json" 2>/dev/null)"
	"$vm" stop "$name" >/dev/null 2>&1 || "$vm" kill "$name" >/dev/null 2>&1
	rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	name=
	return 0
}

if [ "${1:-}" = --one ]; then
	# one machine, inside the QEMU lock (below); the payload is ready
	g=$2
	rm -rf "$work"
	work=$3
	deb=$(ls "$work"/payload/kupdate_*_amd64.deb | tail -1)
	trap 'echo "1..$n"; exit 1' INT TERM
	update_one "$g"
	rc=$?
	[ -n "$name" ] && "$vm" kill "$name" >/dev/null 2>&1
	echo "1..$n"
	exit $((rc != 0 || failed > 0))
fi

for g in $(seq "$guests"); do
	# one QEMU on this machine at a time: each machine under the lock
	flock /tmp/kupdate-qemu.lock "$0" --one "$g" "$work" >"$work/tap-$g" 2>&1
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "${line#ok [0-9]* - }" ;;
		"not ok "*) notok "${line#not ok [0-9]* - }" ;;
		1..*) ;;
		*) echo "$line" ;;
		esac
	done <"$work/tap-$g"
	if [ $rc != 0 ]; then
		say "machine $g is not healthy: the roll stops here"
		break
	fi
done
finish
