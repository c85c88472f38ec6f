#!/bin/bash
# Faults at every phase of the update cycle, in QEMU (TAP).  Uses the test-only
# switch KUPDATE_FAULT=PHASE[:N] (kupdate.fault= on the new kernel's command
# line for the boot side; phases and N: cr-engine/base/fault.h).
#
# One boot of kernel A (Debian guest, kupdate and three demo units from the
# payload: demo-counter with a live TCP client on the host, demo-pipe, two
# processes, demo-echo), every fault before the kexec in turn, each checked
# on the real state: apply exits non-zero naming the phase; every unit
# active, not frozen, with the same processes; the counter still counts; no
# nftables table inet kupdate; no cycle (ready or partial) left; no kernel
# loaded for kexec.
#   preflight, netlock:1 (the host client's connection), freeze:2, dump:3,
#   interrupt-dump:2 (SIGINT in the middle of demo-pipe's dump, as Ctrl-C),
#   image-write:2, manifest, kexec-load, a full image filesystem (a 128 KiB
#   tmpfs as KUPDATE_STATE_DIR: refused by the preflight; with the room check
#   off, met by the writes: ENOSPC), kill-dump:2 (kupdate SIGKILLs itself in
#   the middle of demo-pipe's dump; the next kupdate command recovers; once
#   more with demo-echo killed before the recovery: started again by it),
#   kexec-exec (the units are restored on this kernel with their pids).
# The host client's connection saw no reset through all of it (up to the
# kill, then a new one); an idle connection is held through the kill.
# Then two kexecs to kernel B:
#   restore:2 (demo-pipe's restore fails after its tree is created),
#   unlock:1 (demo-counter's network unlock fails) and store-mount (the
#   images are in a pmem store, apply --store, whose early mount by
#   kupdate-store.service fails): demo-pipe is started the ordinary way and
#   reported with the reason, the others are restored with their pids from
#   the store that fstab's mount brought, the lock is released by
#   kupdate-finish, the host client sees no reset;
#   generator (the generator fails): every unit is started the ordinary way
#   and reported, nothing is held (pid reservation, network lock), images
#   removed.
# Last, power loss right after the manifest commit (kexec -e at once to the
# same kernel, without the cycle): nothing is restored, the cycle is
# abandoned and its images removed.
#
# demo-counter and demo-echo are Restart=always, demo-counter's ExecStart= is
# set again, by an administrator's override.conf (as systemctl edit writes
# it, sorting after kupdate's old 50-kupdate-*.conf drop-ins): kupdate's
# drop-ins still win (a kill-dump does not restart them, a restore is one).
#
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
name=faults-$$
BOOT_TIMEOUT=${BOOT_TIMEOUT:-300}
payload=$BUILD/cycle-payload
client=$BUILD/tests/cycle/demo-client
work=$(mktemp -d /tmp/kupdate-faults.XXXXXX)
client_pid=
# shellcheck source=tests/cycle/lib.sh
. "$here/lib.sh"

run() { "$vm" run "$name" -t 300 -- "$@"; }
finish() {
	[ -n "$client_pid" ] && kill "$client_pid" 2>/dev/null
	"$vm" kill "$name" >/dev/null 2>&1
	[ "$failed" = 0 ] && rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	rm -rf "$work"
	echo "1..$n"
	exit $((failed > 0))
}
trap finish INT TERM
# a script that dies on an error (set -u) must not leave its VM running: it
# would hold the QEMU lock every later suite waits for
trap '[ -n "${client_pid:-}" ] && kill "$client_pid" 2>/dev/null
	[ -n "${name:-}" ] && "$vm" kill "$name" >/dev/null 2>&1' EXIT

counter() { query demo-counter get | cut -d' ' -f1; }
start_client() {
	rm -f "$work/stop"
	"$client" 127.0.0.1 "$port" "$work/stop" >"$work/client" 2>&1 &
	client_pid=$!
	sleep 3
}
# the verdict (a client stuck on a dead connection is killed after 30 s)
stop_client() { # stop_client WHAT
	touch "$work/stop"
	for _ in $(seq 60); do kill -0 "$client_pid" 2>/dev/null || break; sleep 0.5; done
	kill "$client_pid" 2>/dev/null
	wait "$client_pid"
	client_pid=
	sed 's/^/# client: /' "$work/client"
	check "$1: the host's TCP client saw no reset, no lost answer" grep -q '^PASS' "$work/client"
}

units="demo-counter demo-pipe demo-echo"
unit_args="--unit demo-counter.service --unit demo-pipe.service --unit demo-echo.service"
declare -A pids

snapshot() {
	for u in $units; do pids[$u]=$(unit_pids $u.service); done
}

# every unit as it was, nothing of the failed apply left
intact() { # intact WHAT [images-only]
	local what=$1 u bad="" c1 c2 left
	for u in $units; do
		local st
		st=$(run "systemctl is-active $u.service; systemctl show -p FreezerState --value $u.service" | tr '\n' ' ')
		[ "$st" = "active running " ] || bad="$bad $u:$st"
		[ "$(unit_pids $u.service)" = "${pids[$u]}" ] || bad="$bad $u:pids($(unit_pids $u.service)!=${pids[$u]})"
	done
	check "$what: every unit active, not frozen, same processes${bad:+ ($bad)}" test -z "$bad"
	c1=$(counter)
	sleep 1
	c2=$(counter)
	check "$what: the counter still counts ($c1 -> $c2)" test "${c2:-0}" -gt "${c1:-0}"
	check "$what: no network lock (nft table inet kupdate)" \
		run '! nft list table inet kupdate >/dev/null 2>&1'
	if [ "${2:-}" = images-only ]; then
		left=$(run 'ls -d /var/lib/kupdate/cycles/*/units /var/lib/kupdate/cycles/.*.tmp 2>/dev/null')
	else
		left=$(run 'ls -A /var/lib/kupdate/cycles 2>/dev/null')
	fi
	check "$what: no cycle left ready or half-made${left:+ ($left)}" test -z "$left"
	check "$what: no kernel left loaded for kexec" test "$(run 'cat /sys/kernel/kexec_loaded')" = 0
	left=$(run 'ls /run/systemd/system/*.service.d/*kupdate-* 2>/dev/null')
	check "$what: no kupdate drop-in left on the units${left:+ ($left)}" test -z "$left"
}

apply_fault() { # apply_fault WHAT EXPECTED-REGEX ENV...
	local what=$1 re=$2 rc
	shift 2
	"$vm" run "$name" -t 300 -- "$* kupdate apply /payload/boot/bzImage-B $unit_args" >"$work/apply" 2>&1
	rc=$?
	sed 's/^/# apply: /' "$work/apply"
	check "$what: apply fails (exit $rc)" test "$rc" != 0 -a "$rc" != 252
	check "$what: the message names it (/$re/)" grep -Eq "$re" "$work/apply"
}

# kexec_with_fault FAULTS: apply into kernel B with kupdate.fault=FAULTS on its
# command line (the running one's, less the cycle's own arguments), wait for
# that boot; $status is then kupdate status there
kexec_with_fault() { # kexec_with_fault FAULTS [APPLY OPTIONS]
	local cmdl
	cmdl=$(run "sed 's/kupdate\.[a-z]*=[^ ]*//g; s/pid_reserve=[^ ]*//g' /proc/cmdline")
	apply_kexec "$1" "${2:-} /payload/boot/bzImage-B $unit_args --append '$cmdl kupdate.fault=$1'"
	status=$(run 'kupdate status')
	echo "$status" | sed 's/^/# status: /'
}

# ---- boot A, install, start the services ----------------------------------------
"$vm" start "$name" --guest debian --kernel A --payload "$payload" --timeout "$BOOT_TIMEOUT" \
	--fwd auto:8080 2>"$work/start" || { sed 's/^/# /' "$work/start"; bail "boot kernel A"; }
"$vm" wait-running "$name" -t "$BOOT_TIMEOUT" >/dev/null 2>&1
port=$("$vm" info "$name" | sed -n 's/^fwd=//p' | tr ',' '\n' | sed -n 's/^\([0-9]*\):8080$/\1/p')
wait_payload || bail "the payload disk is not mounted in the guest"
run 'cp -a /payload/root/. / && systemctl daemon-reload &&
	systemctl enable --now demo-counter.service demo-pipe.service demo-echo.service &&
	systemctl enable kupdate-finish.service &&
	for u in demo-counter demo-echo; do mkdir -p /etc/systemd/system/$u.service.d &&
		printf "[Service]\nRestart=always\nRestartSec=1\n" >/etc/systemd/system/$u.service.d/override.conf; done &&
	printf "ExecStart=\nExecStart=/usr/local/bin/kupdate-demo counter /run/demo-counter.sock 8080\n" \
		>>/etc/systemd/system/demo-counter.service.d/override.conf &&
	systemctl daemon-reload && systemctl restart demo-counter.service demo-echo.service &&
	kupdate enable demo-counter.service demo-pipe.service demo-echo.service' >"$work/out" 2>&1 ||
	{ sed 's/^/# /' "$work/out"; bail "install kupdate and the demo services in the guest"; }
sleep 2
start_client
snapshot
say "pids: $(for u in $units; do printf '%s: %s; ' $u "${pids[$u]}"; done)"

# ---- faults before the kexec -----------------------------------------------------
apply_fault "preflight" 'preflight fault.*|phase preflight' KUPDATE_FAULT=preflight
intact "preflight"
apply_fault "netlock:1" 'netlock fault injected.*' KUPDATE_FAULT=netlock:1
grep -q 'phase dump of demo-counter.service' "$work/apply" || say "(no phase line)"
intact "netlock:1"
apply_fault "freeze:2" 'freeze fault injected' KUPDATE_FAULT=freeze:2
check "freeze:2: the last line names the phase and unit" grep -q 'phase dump of demo-pipe.service' "$work/apply"
intact "freeze:2"
apply_fault "dump:3" 'dump fault injected.*' KUPDATE_FAULT=dump:3
check "dump:3: the last line names the phase and unit" grep -q 'phase dump of demo-echo.service' "$work/apply"
intact "dump:3"
# Ctrl-C in the middle of demo-pipe's dump (the engine sends kupdate SIGINT):
# the dumps stop, every unit resumes, the host client sees no reset
apply_fault "interrupt-dump:2" 'dump interrupted .Interrupt.' KUPDATE_FAULT=interrupt-dump:2
check "interrupt-dump:2: the last line names the phase" grep -q 'apply failed in phase dump' "$work/apply"
intact "interrupt-dump:2"
apply_fault "image-write:2" 'image-write fault injected' KUPDATE_FAULT=image-write:2
intact "image-write:2"
apply_fault "manifest" 'manifest fault injected' KUPDATE_FAULT=manifest
check "manifest: the last line names the phase" grep -q 'phase manifest' "$work/apply"
intact "manifest"
apply_fault "kexec-load" 'kexec-load fault injected' KUPDATE_FAULT=kexec-load
check "kexec-load: the last line names the phase" grep -q 'phase kexec-load' "$work/apply"
intact "kexec-load"

# a full image filesystem: 128 KiB of tmpfs as the state directory
run 'mkdir -p /run/kupdate-small && mount -t tmpfs -o size=128k,mode=0700 kupdate-small /run/kupdate-small' ||
	bail "mount a small tmpfs"
apply_fault "disk full (preflight)" 'not enough room.*' KUPDATE_STATE_DIR=/run/kupdate-small
intact "disk full (preflight)"
apply_fault "disk full (writes)" 'No space left on device' \
	KUPDATE_STATE_DIR=/run/kupdate-small KUPDATE_FAULT=room-check-off
check "disk full (writes): the last line names the phase" grep -q 'phase dump of' "$work/apply"
left=$(run 'ls -A /run/kupdate-small/cycles')
check "disk full (writes): the partial cycle is removed${left:+ ($left)}" test -z "$left"
intact "disk full (writes)"
run 'umount /run/kupdate-small'

stop_client "preflight .. disk full"

# SIGKILL in the middle of a dump: demo-counter is dumped and held (its
# connection locked, out of repair mode once read), demo-pipe half dumped.
# An idle connection from the host is held through it: after the recovery
# it answers (not locked).  (That a connection with unread data at the kill
# loses nothing is the host test fault-kill-dump-tcp: see recover.c.)
exec {held}<>"/dev/tcp/127.0.0.1/$port" || bail "kill-dump: connect to the counter"
echo get >&$held
read -r -t 10 -u $held l0
say "held connection: '$l0'"
"$vm" run "$name" -t 300 -- "KUPDATE_FAULT=kill-dump:2 kupdate apply /payload/boot/bzImage-B $unit_args" >"$work/apply" 2>&1
rc=$?
sed 's/^/# apply: /' "$work/apply"
check "kill-dump:2: kupdate died of SIGKILL (exit $rc)" test "$rc" = 137
check "kill-dump:2: the partial cycle is there before the recovery" \
	run 'ls -d /var/lib/kupdate/cycles/.*.tmp >/dev/null 2>&1'
out=$(run 'kupdate status' 2>&1)
echo "$out" | sed 's/^/# status: /'
check "kill-dump:2: the next kupdate command recovers (names the units)" \
	grep -q 'recovery: .*demo-counter.service' <<<"$out"
intact "kill-dump:2"
# demo-counter (dumped before the kill) and demo-echo (not yet) are
# Restart=always: systemd did not start them again (intact: same pids), and
# nothing of kupdate's overrides them afterwards
check "kill-dump:2: the Restart=always units keep Restart=always, no kupdate drop-in left" \
	run 'for u in demo-counter demo-echo; do test "$(systemctl show -p Restart --value $u.service)" = always || exit 1
		! ls /run/systemd/system/$u.service.d/*kupdate-* 2>/dev/null || exit 1; done'
echo get >&$held
l1=
read -r -t 15 -u $held l1
check "kill-dump:2: the connection held across it answers again ('$l1')" test -n "$l1"
exec {held}>&-
# once more, and demo-echo (not yet frozen when kupdate died) dies of itself
# before the recovery: its hand-over drop-in (Restart=no) holds it down, the
# recovery removes the drop-in and starts it again, saying so
"$vm" run "$name" -t 300 -- "KUPDATE_FAULT=kill-dump:2 kupdate apply /payload/boot/bzImage-B $unit_args" >"$work/apply" 2>&1
run 'kill -9 $(systemctl show -p MainPID --value demo-echo.service)'
sleep 3
check "kill-dump:2 + demo-echo killed: systemd does not restart it while kupdate's drop-in holds" \
	run '! systemctl is-active demo-echo.service >/dev/null'
out=$(run 'kupdate status' 2>&1)
echo "$out" | sed 's/^/# status: /'
check "kill-dump:2 + demo-echo killed: the recovery starts it again and says so" \
	grep -q 'demo-echo.service stopped while kupdate was interrupted: started again' <<<"$out"
sleep 2
new_echo=$(unit_pids demo-echo.service)
check "kill-dump:2 + demo-echo killed: demo-echo is active (pids ${pids[demo-echo]}-> $new_echo), Restart=always again" \
	run 'systemctl is-active demo-echo.service >/dev/null && test "$(systemctl show -p Restart --value demo-echo.service)" = always'
snapshot
intact "kill-dump:2 + demo-echo killed"
start_client

# kexec-exec: the jump fails after the units were retired: they are restored
# on this kernel, same pids, and the cycle is finished (no images)
apply_fault "kexec-exec" 'kexec-exec fault injected' KUPDATE_FAULT=kexec-exec
check "kexec-exec: the units were restored on this kernel" grep -q 'restored on this kernel' "$work/apply"
intact "kexec-exec" images-only
check "kexec-exec: the Restart=always units were not restarted by systemd when retired, and keep Restart=always" \
	run 'for u in demo-counter demo-echo; do test "$(systemctl show -p Restart --value $u.service)" = always || exit 1
		! ls /run/systemd/system/$u.service.d/*kupdate-* 2>/dev/null || exit 1; done'
stop_client "kexec-exec (restored on this kernel)"

# ---- restore of unit 2 and the network unlock of unit 1 fail in kernel B, -------
# and so does the early mount of the image store (pmem, through fstab too)
store=/var/lib/kupdate-store
check "store-mount: an image store on pmem, ext4 -o dax, mounted through fstab" \
	run "mkfs.ext4 -q -F -b 4096 /dev/pmem0 && mkdir -p $store &&
		echo '/dev/pmem0 $store ext4 dax,nofail 0 0' >>/etc/fstab && systemctl daemon-reload &&
		mount $store && chmod 700 $store"
start_client
snapshot
kexec_with_fault restore:2,unlock:1,store-mount "--store $store"
check "store-mount: the images went to the store" grep -q "images in $store/.*/units (--store)" "$work/apply"
check "store-mount: kupdate-store.service failed and said the store is left to fstab's mount" \
	run "systemctl is-failed -q kupdate-store.service &&
		journalctl -b -u kupdate-store.service -o cat | grep -q 'store-mount fault injected.*left to its own mount'"
check "store-mount: fstab's mount brought the store, once, and kupdate-finish emptied it" \
	run "test \"\$(grep -c ' $store ext4 ' /proc/mounts)\" = 1 &&
		test -z \"\$(ls -A $store | grep -v '^lost+found\$')\""
check "restore:2: demo-pipe was started the ordinary way, with the reason" \
	grep -q '^demo-pipe.service *cold-started.*fault injected' <<<"$status"
newpipe=$(unit_pids demo-pipe.service)
check "restore:2: demo-pipe is active with new processes ($newpipe)" \
	test "$(run 'systemctl is-active demo-pipe.service')" = active -a -n "$newpipe" -a "$newpipe" != "${pids[demo-pipe]}"
for u in demo-counter demo-echo; do
	restored_check "restore:2" $u.service "${pids[$u]}"
	check "restore:2: kupdate status says $u.service restored" grep -q "^$u.service *restored" <<<"$status"
done
check "unlock:1: the failed unlock is reported" \
	run 'journalctl -b -u demo-counter.service | grep -q "network unlock fault injected"'
check "unlock:1: kupdate-finish released the network lock" \
	run '! nft list table inet kupdate >/dev/null 2>&1'
check "restore:2,unlock:1: pid reservation released, images removed" \
	run 'test -z "$(cat /proc/sys/kernel/pid_reserve 2>/dev/null)" && ! ls -d /var/lib/kupdate/cycles/*/units 2>/dev/null'
sleep 2
stop_client "restore:2,unlock:1"

# ---- the generator fails in kernel B ---------------------------------------------
snapshot
kexec_with_fault generator
check "generator: the failure is in the kernel log" run 'journalctl -b -k | grep -q "generator fault injected"'
for u in $units; do
	check "generator: $u.service started the ordinary way and reported" \
		grep -q "^$u.service *cold-started" <<<"$status"
	check "generator: $u.service is active with new processes" \
		test "$(run "systemctl is-active $u.service")" = active -a "$(unit_pids $u.service)" != "${pids[$u]}"
done
check "generator: no network lock, no pid reservation, images removed" \
	run '! nft list table inet kupdate >/dev/null 2>&1 && test -z "$(cat /proc/sys/kernel/pid_reserve 2>/dev/null)" &&
		! ls -d /var/lib/kupdate/cycles/*/units 2>/dev/null'

# ---- power loss right after the manifest commit ------------------------------------
# the cycle is made ready (the units are retired), then the machine jumps
# at once to the same kernel without the cycle on its command line: no sync,
# no shutdown, what a crash and an ordinary boot would do
snapshot
boot3=$(boot_id)
# the state the units had: afresh, their counts start again (their pids may
# well be the same numbers: the boot is the same each time); they run a
# while first, so that their counts are well above those of a fresh start
sleep 10
count_before=$(query demo-counter get | cut -d' ' -f1)
sent_before=$(query demo-pipe get | cut -d' ' -f2)
out=$(run "KUPDATE_TEST_NO_JUMP=1 kupdate apply /payload/boot/bzImage-B $unit_args" 2>&1)
echo "$out" | sed 's/^/# apply: /'
cycle=$(sed -n 's/.*cycle \([^ ]*\) ready, not jumping.*/\1/p' <<<"$out")
check "power loss: a cycle is ready ($cycle)" test -n "$cycle"
run "kexec -s -l /payload/boot/bzImage-B --append=\"\$(sed 's/kupdate\.[a-z]*=[^ ]*//g; s/pid_reserve=[^ ]*//g' /proc/cmdline)\" && kexec -e" >/dev/null 2>&1
new_boot "$boot3" || bail "power loss: the next boot did not come up"
status=$(run "kupdate status --cycle $cycle")
echo "$status" | sed 's/^/# status: /'
check "power loss: nothing was restored, status says abandoned" \
	test "$(grep -c ' abandoned ' <<<"$status")" = 3
check "power loss: the images were removed" run "! test -e /var/lib/kupdate/cycles/$cycle/units"
for u in $units; do
	check "power loss: $u.service is active again" test "$(run "systemctl is-active $u.service")" = active
done
c=$(query demo-counter get | cut -d' ' -f1)
check "power loss: demo-counter started afresh (count $count_before before, $c now)" \
	test -n "$c" -a -n "$count_before" -a "${c:-0}" -lt "${count_before:-0}"
p=$(query demo-pipe get | cut -d' ' -f2)
check "power loss: demo-pipe started afresh (sent $sent_before before, $p now)" \
	test -n "$p" -a -n "$sent_before" -a "${p:-0}" -lt "${sent_before:-0}"
finish
