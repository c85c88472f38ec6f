#!/bin/bash
# The stock cycle in QEMU, TAP: Debian's own kernels (kernel/stock/kernels,
# downloaded by kernel/stock.sh, never built here), installed with dpkg as
# apt installs them (initramfs-tools makes each initrd, the modules go to
# /lib/modules), none with kupdate's pid_reserve= patch:
# the new boot moves the pid allocator above the saved pids
# (ns_last_pid), and a saved pid a process of the new boot holds makes
# its unit start the ordinary way, said so, never restored with another
# pid.  The units of the cycle test that carry state (an in-memory counter
# with the host's client, two processes and a pipe, the journal's stream, a
# checksummed record stream, Debian's redis-server and nginx as shipped, a
# sandboxed unit, a unit in a network namespace of its own), kept across
#
#   0 the guest image has K1 and K2 installed by dpkg at its build (a
#     chroot, as a cloud image is made: make stock-image; initramfs-tools
#     takes seconds there and minutes each under the emulator); QEMU
#     boots K1 through its initrd, the units are installed, enabled, and
#     started by a plain reboot (kexec) as at an operator's boot
#   1 K1 -> K2: `kupdate apply` without a kernel: the newest installed,
#     with its initrd, without pid_reserve=
#   2 K2 -> K3: dpkg -i of K3 with auto-apply = yes in kupdate.conf:
#     apt's hook says the kernel can replace the running one and has
#     systemd run `kupdate apply --after-apt` once dpkg is done
#   3 K3 -> K1: `kupdate apply /boot/vmlinuz-K1 --initrd ...`, back
#
# After each: the release, every unit restored with its processes (or,
# when a saved pid was taken, started the ordinary way with the reason),
# memory intact, the clients saw a pause and no reset, the network lock
# (nf_tables, a module here) held the connections, images removed.  The
# report counts the saved pids taken over the cycles.
#
# usage: tests/cycle/stock.sh
set -uo pipefail
. "$(dirname "$0")/../../qemu-kexec/qemu-lock.sh"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$top/qemu-kexec/vm
name=stock-$$
BOOT_TIMEOUT=${BOOT_TIMEOUT:-300}
work=$(mktemp -d /tmp/kupdate-stock.XXXXXX)
client_pid= stream_pid= redis_pid= curl_pid=
# shellcheck source=tests/cycle/lib.sh
. "$here/lib.sh"

run() { "$vm" run "$name" -t 120 -- "$@"; }
finish() {
	for p in $client_pid $stream_pid $redis_pid $curl_pid; do kill "$p" 2>/dev/null; done
	"$vm" kill "$name" >/dev/null 2>&1
	[ "$failed" = 0 ] && rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	rm -rf "$work"
	echo "1..$n"
	exit $((failed > 0))
}
trap finish INT TERM
trap 'for p in ${client_pid:-} ${stream_pid:-} ${redis_pid:-} ${curl_pid:-}; do kill "$p" 2>/dev/null; done
	[ -n "${name:-}" ] && "$vm" kill "$name" >/dev/null 2>&1' EXIT

# ---- the packages --------------------------------------------------------------
t0=$(now)
if ! debs=$("$top/kernel/stock.sh" 2>"$work/fetch"); then
	sed 's/^/# /' "$work/fetch"
	notok "download Debian's kernel packages (kernel/stock.sh)"
	finish
fi
mapfile -t pkgs < <(sed 's/#.*//; /^[[:space:]]*$/d' "$top/kernel/stock/kernels")
k1=${pkgs[0]#linux-image-} k2=${pkgs[1]#linux-image-} k3=${pkgs[2]#linux-image-}
deb() { ls "$debs/linux-image-$1"_*.deb | head -1; }
mkdir -p "$work/payload/stock"
cp -a "$BUILD/cycle-payload/." "$work/payload/"
cp "$(deb "$k3")" "$work/payload/stock/"
say "packages: $(cd "$work/payload/stock" && ls | xargs) ($(since "$t0") s)"

# ---- 0. the guest: K1 and K2 installed by dpkg at the image's build, K1 booted --
t0=$(now)
sb=$BUILD/qemu/stock-boot
"$vm" start "$name" --guest debian --image "$BUILD/qemu/rootfs-stock.img" \
	--kernel "$sb/vmlinuz-$k1" --initrd "$sb/initrd.img-$k1" --payload "$work/payload" --timeout "$BOOT_TIMEOUT" \
	--fwd auto:8080 --fwd auto:7000 --fwd auto:6379 --fwd auto:80 \
	2>"$work/start" || { sed 's/^/# /' "$work/start"; bail "boot $k1 through its initrd"; }
"$vm" wait-running "$name" -t "$BOOT_TIMEOUT" >/dev/null 2>&1
rel=$(run 'uname -r')
check "boot $k1: the Debian kernel runs ($rel) from its initrd, in $(since "$t0") s" test "$rel" = "$k1"
check "$k1 and $k2 are installed by dpkg, each with its initrd and modules" \
	run "for k in $k1 $k2; do dpkg-query -W -f '\${Status}\n' linux-image-\$k | grep -q 'install ok installed' &&
		test -s /boot/vmlinuz-\$k -a -s /boot/initrd.img-\$k -a -d /lib/modules/\$k/kernel || exit 1; done"
port=$(fwd 8080) port_echo=$(fwd 7000) port_redis=$(fwd 6379) port_http=$(fwd 80)
wait_payload || bail "the payload disk is not mounted in the guest"
run "lsmod | grep -E '^(virtio_blk|virtio_net|virtio_console) ' | cut -d' ' -f1 | xargs" 2>&1 | sed 's/^/# modules loaded: /'
units="demo-counter demo-pipe demo-log demo-echo redis-server nginx demo-sandbox demo-netns"
nunits=8
# kupdate and the demo units, started and enabled as an operator's
# services; redis reachable from the host, without persistence
run "cp -a /payload/root/. / && systemctl daemon-reload &&
	sed -i 's/^bind .*/bind 0.0.0.0/; s/^protected-mode yes/protected-mode no/' /etc/redis/redis.conf &&
	echo 'save \"\"' >>/etc/redis/redis.conf && systemctl restart redis-server.service &&
	systemctl enable --now $(sed 's/\([^ ]*\)/\1.service/g' <<<"$units") &&
	systemctl enable kupdate-finish.service &&
	dd if=/dev/urandom of=/var/www/html/big.bin bs=1M count=16 status=none" >"$work/out" 2>&1 ||
	{ sed 's/^/# /' "$work/out"; bail "install kupdate and the demo units in the guest"; }
big_sum=$(run 'sha256sum /var/www/html/big.bin | cut -d" " -f1')
# a reboot, plainly (kexec-tools, the running command line), so that the
# boot starts the units, with the pids a boot gives them
b=$(boot_id)
t0=$(now)
run "kexec -s -l /boot/vmlinuz-$k1 --initrd=/boot/initrd.img-$k1 --reuse-cmdline && systemctl kexec" >/dev/null 2>&1
new_boot "$b" || bail "a plain kexec into $k1 (its initrd, the running command line)"
say "reboot into $k1 (kexec): $(since "$t0") s"
check "boot $k1: the units run" run "for u in $units; do systemctl is-active -q \$u.service || exit 1; done"
check "kupdate enable: $nunits units preserved" \
	run "kupdate enable $(sed 's/\([^ ]*\)/\1.service/g' <<<"$units") >/dev/null"
sleep 2
list=$(run 'kupdate list')
echo "$list" | sed 's/^/# /'
check "kupdate list: the $nunits units can be checkpointed on Debian's kernel" \
	test "$(grep -c -E ' yes( \(saves .*\))?$' <<<"$list")" = $nunits
# kupdate check without a kernel: the one apply would go to, K2
chk=$(run 'kupdate check 2>&1; echo "check exit $?"')
echo "$chk" | grep -vE '^  +ok ' | sed 's/^/# check: /'
check "kupdate check (no kernel named) checks the newest installed, $k2, and a cycle can run" \
	eval 'grep -q "checking the newest kernel installed, $k2" <<<"$chk" && grep -q "^check exit 0$" <<<"$chk"'
check "kupdate check says $k2 has no pid_reserve= patch (apply goes without it)" \
	grep -q "pid_reserve patch: no (apply goes without it" <<<"$chk"

# ---- one update: the clients on, apply, the new boot checked --------------------
declare -A pids
taken=0 restored_all=0 gens=
# step LABEL EXPECTED_RELEASE: after the new boot, what came back
after_boot() {
	local label=$1 expect=$2 u now st line
	rel=$(run 'uname -r')
	check "$label: running $expect" test "$rel" = "$expect"
	st=$(run 'kupdate status')
	echo "$st" | sed 's/^/# status: /'
	run "journalctl -b -o cat | grep -E 'no pid reservation|pids now start above|connections held' | head -5" 2>&1 |
		sed "s/^/# $label: /"
	gen=$(run 'journalctl -b -o cat | grep -o "no pid reservation on this kernel: .*" | head -1')
	gens="$gens; $label: ${gen#no pid reservation on this kernel: }"
	check "$label: no pid_reserve= on the command line; the generator saw it and kept the pid allocator above the saved pids ($gen)" \
		eval 'run "! grep -q pid_reserve= /proc/cmdline" && test -n "$gen"'
	counter_ok=0
	for u in $units; do
		now=$(active $u.service && unit_pids $u.service)
		line=$(grep "^$u.service " <<<"$st")
		if [ -n "$now" ] && [ "$now" = "${pids[$u]}" ] && grep -q ' restored ' <<<"$line"; then
			ok "$label: $u.service restored with its processes (${now% })"
			restored_all=$((restored_all + 1))
			[ $u = demo-counter ] && counter_ok=1
		elif grep -q 'cold-started.*pid [0-9]* is in use' <<<"$line" && [ -n "$now" ] && [ "$now" != "${pids[$u]}" ]; then
			ok "$label: $u.service: a saved pid was held in the new boot; started the ordinary way, and said so ($(grep -o 'pid [0-9]* is in use[^;]*' <<<"$line" | head -1))"
			taken=$((taken + 1))
		else
			notok "$label: $u.service restored with its processes (${pids[$u]% } before, '${now% }' now)"
			why_unit $u.service
		fi
	done
	if [ $counter_ok = 1 ]; then
		after=$(query demo-counter check)
		check "$label: the counter's memory intact, the count went on ($before -> $after)" \
			awk -v a="$before" -v b="$after" 'BEGIN { split(a, x); split(b, y);
				exit !(y[1] == "ok" && y[3] == x[3] && y[2] >= x[2]) }'
	fi
	check "$label: the network lock held the units' connections (nf_tables loaded as a module: $(run 'lsmod | grep -c "^nf_tables "'))" \
		run "journalctl -b -u kupdate-netlock.service -o cat | grep -q 'connections held' && lsmod | grep -q '^nf_tables '"
	run 'for i in $(seq 120); do test "$(systemctl show -p ActiveState --value kupdate-finish.service)" != activating && break; sleep 1; done'
	check "$label: kupdate-finish released the lock and removed the images" \
		run '! nft list table inet kupdate 2>/dev/null | grep -q "elements = {" && ! ls -d /var/lib/kupdate/cycles/*/units 2>/dev/null'
	sleep 2
	touch "$work/stop"
	wait "$client_pid" "$stream_pid" "$redis_pid" "$curl_pid"
	client_pid= stream_pid= redis_pid= curl_pid=
	for c in client stream redis; do
		grep -E '^(PASS|FAIL)' "$work/$c" | sed "s/^/# $c: /"
		case $c in client) u=demo-counter ;; stream) u=demo-echo ;; redis) u=redis-server ;; esac
		if [ "$(active $u.service && unit_pids $u.service)" = "${pids[$u]}" ]; then
			check "$label: $c: a pause, never a reset, nothing lost" grep -q '^PASS' "$work/$c"
		else
			say "$label: $c not judged: $u was started the ordinary way"
		fi
	done
	if [ "$(active nginx.service && unit_pids nginx.service)" = "${pids[nginx]}" ]; then
		check "$label: nginx: the download across the update is whole (sha256, $(stat -c %s "$work/big.bin" 2>/dev/null) bytes)" \
			test "$(sha256sum <"$work/big.bin" | cut -d' ' -f1)" = "$big_sum"
		sed 's/^/# curl: /' "$work/curl"
	fi
}
# the rate-limited download through nginx, 16 MiB at 100 KiB/s: under way
# across the update that follows
start_download() {
	rm -f "$work/big.bin"
	curl -sS --max-time 1200 --limit-rate 100k -o "$work/big.bin" "http://127.0.0.1:$port_http/big.bin" \
		>"$work/curl" 2>&1 &
	curl_pid=$!
}
before_update() {
	local u
	for u in $units; do pids[$u]=$(unit_pids $u.service); done
	say "pids before: $(for u in $units; do printf '%s: %s; ' $u "${pids[$u]}"; done)"
	start_clients
	[ "${1:-}" = later ] || start_download
	sleep 5
	before=$(query demo-counter check)
}

# ---- 1. K1 -> K2: kupdate apply, no kernel named --------------------------------
before_update
t0=$(now)
apply_kexec "$k1 -> $k2" ""
check "$k1 -> $k2: apply chose the newest kernel installed, $k2, with its initrd" \
	grep -q "updating into the newest kernel installed, $k2 (/boot/vmlinuz-$k2, initrd /boot/initrd.img-$k2)" "$work/apply"
check "$k1 -> $k2: apply saw Debian's kernel has no pid_reserve= and went without" \
	grep -q "has no pid_reserve= (a kernel without kupdate's patch)" "$work/apply"
say "$k1 -> $k2: apply to the new boot's multi-user: $(since "$t0") s"
after_boot "$k1 -> $k2" "$k2"

# ---- 2. K2 -> K3: apt installs K3, the hook applies it ---------------------------
# (the download starts once dpkg is done: it would be over before the update)
before_update later
run 'mkdir -p /etc/kupdate && echo "auto-apply = yes" >/etc/kupdate/kupdate.conf'
b=$(boot_id)
t0=$(now)
"$vm" run "$name" -t 1200 -- "dpkg -i /payload/stock/linux-image-${k3}_*.deb 2>&1; echo \"dpkg exit \$?\"" \
	>"$work/dpkg" 2>&1
start_download
grep -E 'Setting up|update-initramfs|kupdate|dpkg exit' "$work/dpkg" | sed 's/^/# dpkg: /'
check "$k2 -> $k3: dpkg -i ran apt's kernel hook: $k3 can replace the running kernel keeping the $nunits units" \
	grep -q "it can replace the running kernel without restarting them" "$work/dpkg"
check "$k2 -> $k3: auto-apply = yes: kupdate apply was scheduled for when dpkg is done" \
	grep -q "auto-apply is on (/etc/kupdate/kupdate.conf): kupdate apply runs once apt has finished" "$work/dpkg"
new_boot "$b" || bail "$k2 -> $k3: the automatic apply did not bring up a new kernel"
say "$k2 -> $k3: dpkg -i to the new boot's multi-user: $(since "$t0") s"
check "$k2 -> $k3: kupdate status names the update into $k3" \
	run "kupdate status | grep -q 'kernel: $k2 -> $k3'"
run 'rm -f /etc/kupdate/kupdate.conf'
after_boot "$k2 -> $k3" "$k3"

# ---- 3. K3 -> K1: back, the kernel named ----------------------------------------
before_update
t0=$(now)
apply_kexec "$k3 -> $k1" "/boot/vmlinuz-$k1 --initrd /boot/initrd.img-$k1"
say "$k3 -> $k1: apply to the new boot's multi-user: $(since "$t0") s"
after_boot "$k3 -> $k1" "$k1"

# ---- report -----------------------------------------------------------------------
say "report: over 3 updates between Debian's kernels ($k1, $k2, $k3), $((nunits * 3)) unit restores:"
say "  restored with their pids: $restored_all; a saved pid held in the new boot (started the ordinary way): $taken"
say "  the generator, each boot${gens}"
finish
