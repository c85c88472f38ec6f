#!/bin/bash
# kexec smoke test, TAP: in the Debian guest (systemd), boot kernel A to
# multi-user, write a marker into the pmem region (memmap=256M!1G ->
# /dev/pmem0), kexec into kernel B from inside the guest (systemd's path:
# `systemctl kexec`), boot B to multi-user, check the release changed from
# 6.1.x to 6.12.x and the marker survived; then put an ext4 file system
# mounted with -o dax on the pmem device and go back B -> A with a bare
# `kexec -e` (the fast path), and check the file there.  The kexec command
# line is the current one, so memmap= is passed again.  B is booted with
# pid_reserve=50-999 (our patch): no task of its systemd boot may get a PID
# there, and an empty write releases it.  Prints the time of every phase.
set -uo pipefail
. "$(dirname "$0")/qemu-lock.sh"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$here/vm
name=kexec-smoke-$$  # unique: suites of parallel runs must not share a VM
BOOT_TIMEOUT=${BOOT_TIMEOUT:-240}
# PIDs kept free in boot B by our patch: its first ~50 tasks get PIDs as usual,
# the rest (~60 more up to multi-user) must jump over the range
RESERVE=50-999

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { # check "description" command...
	local d=$1
	shift
	if "$@"; then ok "$d"; else notok "$d"; fi
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
run() { "$vm" run "$name" "$@"; }
timing() { echo "# timing: $*"; }
finish() {
	"$vm" kill "$name" >/dev/null 2>&1
	[ "$failed" = 0 ] && rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	echo "1..$n"
	exit $((failed > 0))
}
# a script that dies on an error (set -u) must not leave its VM running: it
# would hold the QEMU lock every later suite waits for
trap '[ -n "${name:-}" ] && "$vm" kill "$name" >/dev/null 2>&1' EXIT
bail() {
	notok "$*"
	echo "# last serial lines:"
	tail -30 "$("$vm" log "$name")" 2>/dev/null | sed 's/^/# serial: /'
	finish
}

# ---- boot kernel A -----------------------------------------------------------
t0=$(now)
"$vm" start "$name" --guest debian --kernel A --timeout "$BOOT_TIMEOUT" 2>/dev/null ||
	bail "boot kernel A: agent did not come up"
t_agent=$(since "$t0")
state=$("$vm" wait-running "$name" -t "$BOOT_TIMEOUT" 2>&1)
t_multi=$(since "$t0")
check "boot A: multi-user reached, system state '$(head -1 <<<"$state")'" \
	test "$(head -1 <<<"$state")" = running
[ "$(head -1 <<<"$state")" = running ] || echo "$state" | sed 's/^/# /'
timing "boot A: qemu start -> agent ${t_agent} s, -> multi-user ${t_multi} s"
relA=$(run -t 30 -- uname -r)
check "boot A: release $relA is 6.1.x" grep -q '^6\.1\.' <<<"$relA"
boot1=$("$vm" ping "$name" | cut -d' ' -f1)

check "boot A: /dev/pmem0 exists (memmap=256M!1G)" run -t 30 -- test -b /dev/pmem0
marker="kupdate-smoke-$(date +%s%N)-$RANDOM"
check "pmem: marker written raw to /dev/pmem0" run -t 60 -- \
	"printf '%s' '$marker' | dd of=/dev/pmem0 bs=4096 conv=sync,fsync status=none"

# ---- A -> B through systemd --------------------------------------------------
t0=$(now)
check "kexec A->B: kexec -s -l bzImage-B with the current command line + pid_reserve=$RESERVE" \
	run -t 60 -- "kexec -s -l /payload/boot/bzImage-B --append=\"\$(cat /proc/cmdline) pid_reserve=$RESERVE\""
timing "kexec A->B: load $(since "$t0") s"
t0=$(now)
run -t 60 -- 'systemctl kexec' >/dev/null 2>&1
if ! "$vm" ping "$name" -t "$BOOT_TIMEOUT" --not "$boot1" >/dev/null; then
	bail "kexec A->B: agent did not come back in a new boot"
fi
t_agent=$(since "$t0")
state=$("$vm" wait-running "$name" -t "$BOOT_TIMEOUT" 2>&1)
t_multi=$(since "$t0")
check "boot B: multi-user reached after kexec, system state '$(head -1 <<<"$state")'" \
	test "$(head -1 <<<"$state")" = running
[ "$(head -1 <<<"$state")" = running ] || echo "$state" | sed 's/^/# /'
timing "kexec A->B (systemctl kexec): -> agent ${t_agent} s, -> multi-user ${t_multi} s"
relB=$(run -t 30 -- uname -r)
check "boot B: release went from $relA to $relB (6.12.x)" grep -q '^6\.12\.' <<<"$relB"
check "boot B: memmap= was passed again" run -t 30 -- 'grep -q "memmap=256M!1G" /proc/cmdline'
# our patch under a real systemd boot: nothing of B's boot took a reserved PID
tasks=$(run -t 60 -- 'for t in /proc/[0-9]*/task/[0-9]*; do echo "${t##*/}"; done')
inside=$(awk -v a="${RESERVE%-*}" -v b="${RESERVE#*-}" '$1 >= a && $1 <= b' <<<"$tasks" | wc -l)
total=$(wc -l <<<"$tasks")
maxpid=$(sort -n <<<"$tasks" | tail -1)
check "boot B: pid_reserve=$RESERVE kept free by the whole systemd boot ($inside of $total tasks inside, highest PID $maxpid)" \
	test "$inside" = 0 -a "$maxpid" -gt "${RESERVE#*-}"
check "boot B: kernel.pid_reserve released by an empty write" run -t 30 -- \
	'grep -qx "'"$RESERVE"'" /proc/sys/kernel/pid_reserve && echo > /proc/sys/kernel/pid_reserve &&
	 test -z "$(cat /proc/sys/kernel/pid_reserve)"'
got=$(run -t 60 -- "dd if=/dev/pmem0 bs=${#marker} count=1 status=none")
check "pmem: raw marker survived the kexec A->B" test "$got" = "$marker"
boot2=$("$vm" ping "$name" | cut -d' ' -f1)

# ---- ext4 -o dax on pmem, B -> A with a bare kexec -e -----------------------
marker2="kupdate-smoke-dax-$(date +%s%N)-$RANDOM"
check "pmem: ext4 on /dev/pmem0 mounted with -o dax on B, file written" run -t 120 -- \
	"mkfs.ext4 -q -F -b 4096 /dev/pmem0 && mkdir -p /mnt/pmem &&
	 mount -o dax /dev/pmem0 /mnt/pmem && grep -q 'pmem0 .*dax' /proc/mounts &&
	 echo '$marker2' >/mnt/pmem/marker && umount /mnt/pmem"
t0=$(now)
check "kexec B->A: kexec -s -l bzImage-A with the current command line (less pid_reserve=)" \
	run -t 60 -- 'kexec -s -l /payload/boot/bzImage-A \
		--append="$(sed "s/ pid_reserve=[^ ]*//" /proc/cmdline)"'
timing "kexec B->A: load $(since "$t0") s"
t0=$(now)
run -t 60 -- 'sync; kexec -e' >/dev/null 2>&1
if ! "$vm" ping "$name" -t "$BOOT_TIMEOUT" --not "$boot2" >/dev/null; then
	bail "kexec B->A: agent did not come back in a new boot"
fi
t_agent=$(since "$t0")
state=$("$vm" wait-running "$name" -t "$BOOT_TIMEOUT" 2>&1)
t_multi=$(since "$t0")
check "boot A again: multi-user reached after kexec -e, system state '$(head -1 <<<"$state")'" \
	test "$(head -1 <<<"$state")" = running
[ "$(head -1 <<<"$state")" = running ] || echo "$state" | sed 's/^/# /'
timing "kexec B->A (kexec -e): -> agent ${t_agent} s, -> multi-user ${t_multi} s"
relA2=$(run -t 30 -- uname -r)
check "boot A again: release went from $relB to $relA2 (6.1.x)" grep -q '^6\.1\.' <<<"$relA2"
got=$(run -t 60 -- 'mkdir -p /mnt/pmem && mount -o dax /dev/pmem0 /mnt/pmem &&
	cat /mnt/pmem/marker; umount /mnt/pmem')
check "pmem: ext4 file survived the kexec B->A" test "$got" = "$marker2"

# ---- shutdown ------------------------------------------------------------------
t0=$(now)
check "clean poweroff" "$vm" stop "$name" -t 90
timing "poweroff $(since "$t0") s"
finish
