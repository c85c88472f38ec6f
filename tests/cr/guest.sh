#!/bin/bash
# The checkpoint/restore tests whose outcome depends on the kernel, run inside
# the QEMU guest on kernel A (6.1) and kernel B (6.12): the engine's paths for
# kernels without PAGEMAP_SCAN (6.1) and with soft-dirty (both; this host has
# none), the vDSO and time namespace of each kernel, TCP repair, seccomp,
# System V shared memory.  TAP, each line tagged with the kernel.
#
# usage: tests/cr/guest.sh        (BUILD: the build directory, default build)
set -uo pipefail
. "$(dirname "$0")/../../qemu-kexec/qemu-lock.sh"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$top/qemu-kexec/vm
name=crguest-$$
BOOT_TIMEOUT=${BOOT_TIMEOUT:-300}
# the tests: soft-dirty pre-dumps, memory, threads, vDSO and clocks, TCP,
# unix, pipes, timers, signals, seccomp, System V segments, fd kinds, pages
# shared copy-on-write; a pid namespace (set_tid at two levels, 5.9) and a
# container's mount namespace with its propagation (MOVE_MOUNT_SET_GROUP, 5.15),
# a subtree of control groups with a cgroup namespace (CLONE_INTO_CGROUP, 5.7);
# a container's network namespace made again (its veth to the host, a
# stream through it), a container's user namespace with its pid namespace
# (set_tid inside it, ns_last_pid outside, an idmapped bind)
# (CR_GUEST_ONLY: a prefix regex of test names instead, for a developer)
only=${CR_GUEST_ONLY:-'predump-softdirty|loop|tree|mem|zeropages|threads|vdso|clocks|tcploop|tcpstream-lo|unixsk|pipes|timerfd|signals|ptimers|seccomp|sysvshm-new|memfd|epoll|cow |cow-noshare|cow-pre-softdirty|pidns |ctrroot-shared|cgtree |netmade |tcpstream-ctr |ctrroot-user |ctrroot-userpid '}

stage=$(mktemp -d /tmp/kupdate-crguest.XXXXXX)
n=0 failed=0
finish() {
	"$vm" kill "$name" >/dev/null 2>&1
	[ "$failed" = 0 ] && rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	rm -rf "$stage"
	echo "1..$n"
	exit $((failed > 0))
}
trap finish INT TERM
# a script that dies on an error (set -u) must not leave its VM running: it
# would hold the QEMU lock every later suite waits for
trap '[ -n "${name:-}" ] && "$vm" kill "$name" >/dev/null 2>&1' EXIT
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }

mkdir -p "$stage/bin" "$stage/cr"
cp "$BUILD/bin/kupdate" "$stage/bin/"
cp "$BUILD"/tests/cr/* "$stage/cr/" 2>/dev/null
cp "$here/run-tests.sh" "$stage/cr/"
# under emulation everything is slower: each test gets 240 s to get ready and
# to end (crrun --timeout; the last one given counts)
sed -E 's/^([^#|][^|]*\|)/\1 --timeout 240 /' "$here/tests.list" >"$stage/cr/tests.list"

for k in A B; do
	if ! "$vm" start "$name" --guest debian --kernel $k --payload "$stage" \
		--timeout "$BOOT_TIMEOUT" >/dev/null 2>"$stage/start"; then
		sed 's/^/# /' "$stage/start"
		notok "kernel $k: the guest did not boot"
		continue
	fi
	rel=$("$vm" run "$name" -t 60 -- 'uname -r')
	"$vm" run "$name" -t 120 -- 'for i in $(seq 300); do test -d /payload/cr && exit 0
		test -e /dev/disk/by-id/virtio-payload && mount /payload 2>/dev/null; sleep 0.2; done; exit 1' ||
		notok "kernel $k: the payload is not mounted"
	# the tests write their work directories to /tmp; ptimers needs the
	# machine up for a minute (a timer whose first expiry was 55 s ago)
	"$vm" run "$name" -t 1800 -- \
		"while [ \$(cut -d. -f1 /proc/uptime) -lt 60 ]; do sleep 1; done
		cd /tmp && CRT_TMP=/tmp /payload/cr/run-tests.sh /payload/bin/kupdate /payload/cr '' '$only'" \
		>"$stage/out" 2>&1
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) n=$((n + 1)); echo "ok $n - [$rel] ${line#ok * - }" ;;
		"not ok "*) n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - [$rel] ${line#not ok * - }" ;;
		1..*) ;;
		*) echo "$line" ;;
		esac
	done <"$stage/out"
	[ "$rc" = 0 ] || grep -q '^not ok' "$stage/out" || notok "kernel $k: the test run exited $rc"
	"$vm" kill "$name" >/dev/null 2>&1
done
finish
