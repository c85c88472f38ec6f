#!/bin/bash
# Issue 30's programs across the kernel update cycle in QEMU, TAP.  First
# of them: Debian's sshd as shipped, with libpam-systemd as on a standard
# server, so each session lives in a logind scope of its own
# (user-0.slice/session-ID.scope) below the listener of ssh.service:
#
#   0 boot A; ssh.service enabled and preserved (kupdate enable), a key of
#     the test's for root; from the host, over QEMU's forward:
#       s1 a session with a pty running a loop that prints a numbered line
#          every 200 ms (the host stamps each line as it comes)
#       s2 an idle interactive shell, fed from a FIFO
#   a build and an archive, each in a unit of systemd-run's (transient:
#     its unit file in /run), preserved with kupdate enable:
#       kupdate-makej    make -j2 of a generated C project (40 sources)
#       kupdate-tarpipe  tar c DIR | gzip -9 -n > FILE
#       kupdate-tcpdump  tcpdump -i IF -U -w FILE 'tcp port 22' (the sessions)
#   a VNC desktop: Debian's tigervncserver@:1.service (Xtigervnc and xlogo
#     in a logind session of user kt), the host's RFB client connected
#   1 A -> B, run by the operator from a third session, s3: `kupdate apply`
#     hands the work to kupdate-apply-PID.service and follows its output
#     (orchestrator/handoff.c); s3 is dumped and restored with the others
#     and prints the apply's report on the new kernel, then goes on
#   2 B -> A, `kupdate apply` from outside of the sessions (the agent)
#
# After each: ssh.service's processes and every session's are those of
# before, each in its scope again; loginctl lists the same sessions; s1's
# lines go on without a gap (its pause: the longest wait between two
# lines); s2's shell answers with its pid of before; s3 got the report.
# After A -> B the build and the archive were restored mid-run, finish, and
# their outputs are byte-identical to those of the same jobs run again
# without interruption; at B -> A, ended, they are preserved no more.
# tcpdump keeps its pids through both cycles and its capture goes on in
# the same file: tcpdump -r reads packets from before each apply and after
# each cycle, their times in order.
# The VNC desktop keeps its pids and scope through both cycles; the
# client's connection of before answers after A->B with the screen of
# before, and a new one after B->A sees it too.
#
# usage: tests/cycle/programs.sh
set -uo pipefail
. "$(dirname "$0")/../../qemu-kexec/qemu-lock.sh"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$top/qemu-kexec/vm
name=programs-$$
BOOT_TIMEOUT=${BOOT_TIMEOUT:-300}
work=$(mktemp -d /tmp/kupdate-programs.XXXXXX)
s1_pid= s2_pid= s2_hold= s3_pid= vnc_pid=
# shellcheck source=tests/cycle/lib.sh
. "$here/lib.sh"

run() { "$vm" run "$name" -t 120 -- "$@"; }
stop_sessions() {
	for p in $s1_pid $s2_pid $s2_hold $s3_pid $vnc_pid; do kill "$p" 2>/dev/null; done
}
finish() {
	stop_sessions
	"$vm" kill "$name" >/dev/null 2>&1
	[ "$failed" = 0 ] && rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	rm -rf "$work"
	echo "1..$n"
	exit $((failed > 0))
}
trap finish INT TERM
trap 'for p in ${s1_pid:-} ${s2_pid:-} ${s2_hold:-} ${s3_pid:-} ${vnc_pid:-}; do kill "$p" 2>/dev/null; done
	[ -n "${name:-}" ] && "$vm" kill "$name" >/dev/null 2>&1' EXIT

# ---- boot A, sshd, the sessions ------------------------------------------------
t0=$(now)
"$vm" start "$name" --guest debian --kernel A --payload "$BUILD/cycle-payload" \
	--timeout "$BOOT_TIMEOUT" --fwd auto:22 --fwd auto:5901 2>"$work/start" ||
	{ sed 's/^/# /' "$work/start"; bail "boot kernel A"; }
"$vm" wait-running "$name" -t "$BOOT_TIMEOUT" >/dev/null 2>&1
say "boot A: $(since "$t0") s"
port_ssh=$(fwd 22)
wait_payload || bail "the payload disk is not mounted in the guest"
ssh-keygen -q -t ed25519 -N '' -f "$work/key" || bail "make an ssh key"
run "cp -a /payload/root/. / && systemctl daemon-reload && systemctl enable kupdate-finish.service &&
	mkdir -p -m 700 /root/.ssh && echo '$(cat "$work/key.pub")' >/root/.ssh/authorized_keys &&
	systemctl enable --now ssh.service && kupdate enable ssh.service" >"$work/out" 2>&1 ||
	{ sed 's/^/# /' "$work/out"; bail "install kupdate, enable ssh.service"; }
ssh_g() {
	ssh -i "$work/key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o LogLevel=ERROR -o ConnectTimeout=20 -o ServerAliveInterval=0 -p "$port_ssh" root@127.0.0.1 "$@"
}
# s1: a line every 200 ms, each stamped by the host as it arrives
ssh_g -tt 'i=0; while :; do i=$((i+1)); echo "line $i"; sleep 0.2; done' </dev/null 2>&1 |
	while IFS= read -r l; do echo "$(date +%s.%N) ${l%$'\r'}"; done >"$work/s1" &
s1_pid=$!
# s2: an interactive shell, fed from a FIFO the test holds open
mkfifo "$work/s2.in"
sleep 100000 >"$work/s2.in" &
s2_hold=$!
ssh_g -tt <"$work/s2.in" >"$work/s2" 2>&1 &
s2_pid=$!
for _ in $(seq 100); do
	[ "$(run 'loginctl list-sessions --no-legend | wc -l')" = 2 ] && [ -s "$work/s1" ] && break
	sleep 0.3
done
echo 'stty -echo; PS1=; echo "s2 shell $$"' >"$work/s2.in"
for _ in $(seq 50); do grep -q 's2 shell [0-9]' "$work/s2" && break; sleep 0.2; done
s2_shell=$(tr -d '\r' <"$work/s2" | grep -o 's2 shell [0-9][0-9]*' | head -1 | cut -d' ' -f3)
say "s2's shell: pid ${s2_shell:-none}"
check "sshd: two sessions from the host, each in a logind scope (libpam-systemd)" \
	test "$(run 'ls -d /sys/fs/cgroup/user.slice/user-0.slice/session-*.scope | wc -l')" = 2 -a -n "$s2_shell"

# the processes of ssh.service and of every session scope, with their cgroups
procs() {
	run 'for f in /sys/fs/cgroup/system.slice/ssh.service/cgroup.procs /sys/fs/cgroup/user.slice/user-0.slice/session-*.scope/cgroup.procs; do
		for p in $(cat $f); do c=$(cat /proc/$p/comm 2>/dev/null) && g=$(cut -d: -f3 /proc/$p/cgroup 2>/dev/null) || continue
			case $c in kupdate | sleep) continue ;; esac; echo "$p $c $g"; done; done | sort -n'
}
sessions() { run 'loginctl list-sessions --no-legend | awk "{print \$1}" | sort | tr "\n" " "'; }
# longest wait between two of s1's lines, from the line before $1 on
s1_pause() { awk -v from="$1" '{ t = $1; n = $3 } n > from && p { d = t - p; if (d > m) m = d } { p = t }
	END { printf "%.2f", m }' "$work/s1"; }
# s1's numbers all there, one after the other, and more than $1 of them
s1_check() { awk -v past="$1" '{ n = $3 } NR > 1 && n != last + 1 { bad = 1 } { last = n }
	END { exit !(!bad && last > past) }' "$work/s1"; }
s1_last() { tail -1 "$work/s1" | awk '{ print $3 }'; }

cycle_checks() { # LABEL BEFORE_PROCS BEFORE_SESSIONS S1_BEFORE
	local label=$1 after
	after=$(procs)
	sed 's/^/# after: /' <<<"$after"
	check "$label: ssh.service and its sessions restored with their processes, each in its scope again" \
		test "$after" = "$2"
	[ "$after" = "$2" ] || why_unit ssh.service
	check "$label: loginctl lists the same sessions ($(sessions))" test "$(sessions)" = "$3"
	# each scope was made before the tree, its processes made in it
	check "$label: every session's scope was started before the restore (no scope made after the fact)" \
		run "test -s /run/kupdate/restore-ssh.service.log && ! grep 'scope .* could not be made before' /run/kupdate/restore-ssh.service.log"
	for _ in $(seq 50); do [ "$(s1_last)" -gt $(($4 + 25)) ] && break; sleep 0.2; done
	say "s1: line $(s1_last) now, $4 at the apply; pause $(s1_pause "$4") s"
	check "$label: s1's lines go on after the cycle, none lost or repeated" s1_check $(($4 + 25))
	echo "echo 's2 after $label' \$\$" >"$work/s2.in"
	for _ in $(seq 50); do grep -q "s2 after $label [0-9]" "$work/s2" && break; sleep 0.2; done
	check "$label: s2's idle shell answers after the cycle, the same shell (pid $s2_shell)" \
		grep -q "s2 after $label $s2_shell"$'\r' "$work/s2"
	grep -q "s2 after $label $s2_shell"$'\r' "$work/s2" || tr -d '\r' <"$work/s2" | tail -5 | sed 's/^/# s2: /'
}

# ---- the build and the archive, in units of systemd-run's ----------------------
# the project: sources that keep gcc's optimizer busy a while each, built by
# relative paths without debug information (outputs from the sources alone)
run 'set -e; mkdir -p /root/kt/build /root/kt/data; cd /root/kt/build
	awk "BEGIN { n = 40
		for (i = 0; i < n; i++) { f = sprintf(\"f%02d.c\", i)
			printf \"unsigned long f%d(unsigned long x)\\n{\\n\", i > f
			for (k = 0; k < 24; k++)
				printf \"\\tfor (int i%d = 0; i%d < %d; i%d++)\\n\\t\\tx = (x * %uu + i%d) ^ (x >> %d);\\n\",
					k, k, 7 + (i * 31 + k * 7) % 13, k, 2654435761 + i * 97 + k, k, 1 + (k + i) % 29 > f
			printf \"\\treturn x;\\n}\\n\" > f; close(f) }
		m = \"main.c\"; printf \"#include <stdio.h>\\n\" > m
		for (i = 0; i < n; i++) printf \"unsigned long f%d(unsigned long);\\n\", i > m
		printf \"int main(void)\\n{\\n\\tunsigned long x = 1;\\n\" > m
		for (i = 0; i < n; i++) printf \"\\tx = f%d(x);\\n\", i > m
		printf \"\\tprintf(\\\"%%lu\\\\n\\\", x);\\n\\treturn 0;\\n}\\n\" > m }"
	printf "OBJ := \$(patsubst %%.c,%%.o,\$(wildcard *.c))\nprog: \$(OBJ)\n\tgcc -o \$@ \$(OBJ)\n%%.o: %%.c\n\tgcc -O3 -funroll-all-loops -c -o \$@ \$<\n" >Makefile
	cp -a /root/kt/build /root/kt/build-ref
	for i in $(seq 12); do seq -f "record %g of the archive test, file $i" 1 120000 >/root/kt/data/f$i; done
	head -c 150000000 /dev/urandom | base64 >/root/kt/data/random' \
	>"$work/out" 2>&1 || { sed 's/^/# /' "$work/out"; bail "make the project and the archive's files"; }
TAR="tar c --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner data | gzip -9 -n"
run "systemd-run -q --unit=kupdate-makej -p WorkingDirectory=/root/kt/build make -s -j2 &&
	systemd-run -q --unit=kupdate-tarpipe -p WorkingDirectory=/root/kt sh -c '$TAR >out.tar.gz' &&
	kupdate enable kupdate-makej.service kupdate-tarpipe.service" >"$work/out" 2>&1 ||
	{ sed 's/^/# /' "$work/out"; bail "start the build and the archive in units of systemd-run's"; }
sed 's/^/# /' "$work/out"
job_pids() { run "cat /sys/fs/cgroup/system.slice/$1/cgroup.procs 2>/dev/null | sort -n | tr '\n' ' '"; }

# tcpdump, Debian's, capturing the ssh sessions' packets on the guest's
# interface into a file (libpcap: a TPACKET_V3 ring, a BPF filter, the
# interface promiscuous), in a unit of systemd-run's; it runs through both
# cycles
gif=$(run "ip -o route show default | awk '{ print \$5; exit }'")
run "systemd-run -q --unit=kupdate-tcpdump tcpdump -i $gif -U -w /root/kt/cap.pcap 'tcp port 22' &&
	sleep 3 && kupdate enable kupdate-tcpdump.service >/dev/null" >"$work/out" 2>&1 ||
	{ sed 's/^/# /' "$work/out"; bail "start tcpdump in a unit of systemd-run's"; }
tcpdump_pids=$(job_pids kupdate-tcpdump.service)
say "tcpdump on $gif: pids $tcpdump_pids"
# the capture as tcpdump -r reads it: packets, those before guest time $1,
# those after $2, and 1 if a timestamp goes back
cap() {
	run "tcpdump -r /root/kt/cap.pcap -tt -n 2>/dev/null | awk -v a=$1 -v b=$2 '{ t = \$1 + 0; if (t < p) bad = 1; p = t
		if (t < a) n0++; if (t > b) n1++; n++ } END { printf \"%d %d %d %d\", n, n0, n1, bad }'"
}
tcpdump_check() { # LABEL BEFORE AFTER: packets before the apply and after the cycle, in order
	local np n0 n1 bad line
	sleep 3 # s1's lines: packets
	read -r np n0 n1 bad <<<"$(cap "$2" "$3")"
	line=$(run 'kupdate status 2>&1' | grep '^kupdate-tcpdump.service ')
	say "tcpdump: $line; capture: $np packets, $n0 before the apply, $n1 after the cycle"
	check "$1: tcpdump restored with its pids ($(job_pids kupdate-tcpdump.service)), its capture going on in the same file: packets from before and after, in order ($n0, $n1)" \
		test "$(job_pids kupdate-tcpdump.service)" = "$tcpdump_pids" -a "${n0:-0}" -gt 0 -a "${n1:-0}" -gt 0 -a "${bad:-1}" = 0
	grep -q ' restored ' <<<"$line" || why_unit kupdate-tcpdump.service
	declare -g "tcpdump_$4=$n0 before, $n1 after, $(awk '{ print $2 ", downtime " $10 " " $11 }' <<<"$line")"
}

# ---- the VNC desktop ------------------------------------------------------------
# Debian's tigervncserver@.service as shipped, display :1 mapped to a user:
# its tigervncsession opens a PAM session (a logind scope below the unit's
# process) and runs the user's desktop there.  What the user sets: a VNC
# password, remote viewers allowed ($localhost = "no"; the unit's own
# comment says how), a 640x480 screen, an xstartup running xlogo.  The
# host's RFB client (vnc-client) captures the screen through QEMU's
# forward, then asks for a pixel every 250 ms on the same connection
# through A->B; after it, the whole screen again: the same
run "$(cat <<'EOS'
set -e
useradd -m -s /bin/bash kt
echo ':1=kt' >>/etc/tigervnc/vncserver.users
mkdir -p /home/kt/.vnc
echo secret12 | vncpasswd -f >/home/kt/.vnc/passwd
chmod 600 /home/kt/.vnc/passwd
cat >/home/kt/.vnc/tigervnc.conf <<'EOF'
$localhost = "no";
$geometry = "640x480";
1;
EOF
cat >/home/kt/.vnc/xstartup <<'EOF'
#!/bin/sh
exec xlogo -geometry 400x400+100+40
EOF
chmod +x /home/kt/.vnc/xstartup
chown -R kt:kt /home/kt/.vnc
systemctl start tigervncserver@:1.service
for i in $(seq 150); do xlogo=$(pidof xlogo) && break; sleep 0.2; done
test -n "$xlogo"
sleep 3
kupdate enable tigervncserver@:1.service >/dev/null
EOS
)" >"$work/out" 2>&1 || { sed 's/^/# /' "$work/out"; run 'journalctl -u tigervncserver@:1.service -n 30 --no-pager' | sed 's/^/# vnc: /'; bail "start the VNC desktop (tigervncserver@:1.service)"; }
vnc_pids=$(run 'echo $(pidof Xtigervnc) $(pidof xlogo)')
vnc_scope=$(run 'cut -d: -f3 /proc/$(pidof xlogo)/cgroup')
"$BUILD/tests/cycle/vnc-client" 127.0.0.1 "$(fwd 5901)" secret12 "$work/vnc.stop" >"$work/vnc" 2>&1 &
vnc_pid=$!
for _ in $(seq 150); do grep -q '^ready' "$work/vnc" && break; kill -0 "$vnc_pid" 2>/dev/null || break; sleep 0.2; done
vnc_ready=$(grep '^ready' "$work/vnc")
check "VNC: Xtigervnc and xlogo (pids $vnc_pids) run in a logind session ($vnc_scope); the host's RFB client sees the screen ($vnc_ready)" \
	grep -q '^ready 640x480 colors [2-9]' <<<"$vnc_ready"
[ -n "$vnc_ready" ] || sed 's/^/# vnc-client: /' "$work/vnc"
vnc_hash=$(awk '{ print $6 }' <<<"$vnc_ready")

# ---- 1: A -> B from a session --------------------------------------------------
before=$(procs)
sed 's/^/# before: /' <<<"$before"
sess_before=$(sessions)
b=$(boot_id)
s1_at=$(s1_last)
t_ab=$(run 'date +%s')
ssh_g -tt 'kupdate apply /payload/boot/bzImage-B; echo "apply-rc=$?"; echo "kernel=$(uname -r)"' \
	</dev/null >"$work/s3" 2>&1 &
s3_pid=$!
# s3 prints apply's status: on the new kernel, or at once if it failed
for _ in $(seq 1800); do
	tr -d '\r' <"$work/s3" | grep -q '^apply-rc=' && break
	kill -0 "$s3_pid" 2>/dev/null || break
	sleep 0.5
done
tr -d '\r' <"$work/s3" | grep -qx 'apply-rc=0' || {
	tr -d '\r' <"$work/s3" | sed 's/^/# s3: /'
	bail "A->B: kupdate apply run from s3 did not end with status 0"
}
new_boot "$b" || bail "A->B: the new kernel did not come up"
for _ in $(seq 600); do kill -0 "$s3_pid" 2>/dev/null || break; sleep 0.5; done
kill "$s3_pid" 2>/dev/null
s3_pid=
tr -d '\r' <"$work/s3" | sed 's/^/# s3: /'
release_b=$(run 'uname -r')
check "A->B: kupdate apply from an ssh session handed its work to kupdate-apply-PID.service" \
	grep -q 'the apply runs in kupdate-apply-[0-9]*.service' "$work/s3"
check "A->B: the apply's session came back on the new kernel with its report (ssh.service restored) and status 0" \
	bash -c "tr -d '\r' <'$work/s3' | grep -q '^ssh.service .*restored' &&
		tr -d '\r' <'$work/s3' | grep -qx 'apply-rc=0' && tr -d '\r' <'$work/s3' | grep -qx 'kernel=$release_b'"
# the session of the apply ended after its report: two remain
sess_b=$(sessions)
check "A->B: logind ended the apply's session when it closed; the others remain ($sess_b)" \
	test "$(wc -w <<<"$sess_b")" = "$(wc -w <<<"$sess_before")"
cycle_checks "A->B" "$before" "$sess_before" "$s1_at"
pause_ab=$(s1_pause "$s1_at")
t_b=$(run 'date +%s')
tcpdump_check "A->B" "$t_ab" "$t_b" ab

# the desktop: the same processes in their session's scope, and the client's
# connection of before answering again with the screen of before
vnc_check() { # LABEL
	local now_pids now_scope
	now_pids=$(run 'echo $(pidof Xtigervnc) $(pidof xlogo)')
	now_scope=$(run 'cut -d: -f3 /proc/$(pidof xlogo)/cgroup')
	check "$1: tigervncserver@:1 restored: Xtigervnc and xlogo with their pids ($now_pids), in their session's scope again ($now_scope)" \
		test "$now_pids" = "$vnc_pids" -a "$now_scope" = "$vnc_scope"
	[ "$now_pids" = "$vnc_pids" ] || why_unit tigervncserver@:1.service
}
vnc_check "A->B"
sleep 3
touch "$work/vnc.stop"
for _ in $(seq 300); do kill -0 "$vnc_pid" 2>/dev/null || break; sleep 0.2; done
kill "$vnc_pid" 2>/dev/null
vnc_pid=
sed 's/^/# vnc-client: /' "$work/vnc"
vnc_wait=$(sed -n 's/.*longest wait between two \([0-9.]*\) s.*/\1/p' "$work/vnc")
check "A->B: VNC: the client's connection of before answered after the cycle, the screen the same as before ($vnc_hash; longest wait ${vnc_wait:-?} s)" \
	grep -q '^PASS' "$work/vnc"

# the build and the archive: restored mid-run, then finished as an
# uninterrupted run of the same jobs finishes
status_b=$(run 'kupdate status 2>&1')
for j in makej tarpipe; do
	line=$(grep "^kupdate-$j.service " <<<"$status_b")
	say "$line"
	check "A->B: kupdate-$j.service (a transient unit) was dumped mid-run and restored" \
		grep -q ' restored ' <<<"$line"
	# RESULT, and DOWNTIME (the 10th and 11th fields: "11595 ms")
	declare "res_$j=$(awk '{ print $2 ", downtime " $10 " " $11 }' <<<"$line")"
done
"$vm" run "$name" -t 700 -- 'for i in $(seq 600); do systemctl is-active -q kupdate-makej.service ||
	systemctl is-active -q kupdate-tarpipe.service || break; sleep 1; done' >"$work/out" 2>&1
"$vm" run "$name" -t 600 -- "cd /root/kt/build-ref && make -s -j2 && cd /root/kt && $TAR >ref.tar.gz" >"$work/ref" 2>&1 ||
	sed 's/^/# reference: /' "$work/ref"
same_build=$(run 'cd /root/kt && n=0; for f in build-ref/*.o build-ref/prog; do cmp -s "$f" "build/${f#build-ref/}" && n=$((n+1)) || echo "differs: $f" >&2; done; echo $n' 2>&1)
say "the build: $same_build"
check "A->B: the build finished after the cycle, its 41 objects and its program byte-identical to an uninterrupted build's" \
	test "$(tail -1 <<<"$same_build")" = 42
check "A->B: the archive finished after the cycle, byte-identical to an uninterrupted run's ($(run 'cd /root/kt && sha256sum out.tar.gz | cut -c1-16'))" \
	run 'cd /root/kt && cmp out.tar.gz ref.tar.gz && test "$(tar tzf out.tar.gz | grep -c "^data/.")" = 13'

# ---- 2: B -> A from outside of the sessions ------------------------------------
before=$(procs)
sess_before=$(sessions)
s1_at=$(s1_last)
t_ba=$(run 'date +%s')
apply_kexec "B->A" /payload/boot/bzImage-A
check "B->A: the build's and the archive's units, ended, are preserved no more (said by apply)" \
	test "$(grep -c 'kupdate-\(makej\|tarpipe\).service: a runtime unit .* that has ended: no longer preserved' "$work/apply")" = 2
cycle_checks "B->A" "$before" "$sess_before" "$s1_at"
pause_ba=$(s1_pause "$s1_at")
tcpdump_check "B->A" "$t_ba" "$(run 'date +%s')" ba
vnc_check "B->A"
: >"$work/vnc.stop"
timeout 120 "$BUILD/tests/cycle/vnc-client" 127.0.0.1 "$(fwd 5901)" secret12 "$work/vnc.stop" >"$work/vnc2" 2>&1
check "B->A: VNC: a new connection sees the screen xlogo drew before both cycles ($(head -1 "$work/vnc2"))" \
	test "$(awk 'NR == 1 { print $6 }' "$work/vnc2")" = "$vnc_hash"

echo "# ---- report ----"
echo "#   sshd (ssh.service; $(wc -w <<<"$sess_before") logind sessions in all, the desktop's too): pids $(awk '{printf "%s%s", sep, $1; sep=","}' <<<"$before")"
echo "#     checked: processes and scopes, loginctl, s1's numbered lines, s2's shell; A->B run from s3"
echo "#     s1's pause: A->B ${pause_ab} s, B->A ${pause_ba} s"
echo "#   make -j2 (kupdate-makej.service, transient), mid-build at A->B: ${res_makej:-?}; outputs: $(tail -1 <<<"$same_build") of 42 identical to an uninterrupted build's"
echo "#   tcpdump (kupdate-tcpdump.service, transient, pids $tcpdump_pids): A->B: ${tcpdump_ab:-?}; B->A: ${tcpdump_ba:-?}"
echo "#   VNC (tigervncserver@:1.service, a logind session of user kt; Xtigervnc, xlogo: pids $vnc_pids)"
echo "#     checked: pids and scope, the screen ($vnc_hash) on the connection of before; its longest wait at A->B ${vnc_wait:-?} s"
echo "#   tar | gzip (kupdate-tarpipe.service, transient), mid-run at A->B: ${res_tarpipe:-?}; archive $(run 'cmp -s /root/kt/out.tar.gz /root/kt/ref.tar.gz && echo identical || echo DIFFERENT') to an uninterrupted run's"
stop_sessions
finish
