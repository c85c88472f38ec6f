#!/bin/bash
# usage: tests/ops/install.sh KUPDATE — `make install DESTDIR=... PREFIX=/usr`
# puts every part where the system looks for it; the initramfs-tools hook
# does what kupdate.target(7) says, on a stand-in /proc (TAP).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$here/../..
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
t=$(mktemp -d /tmp/kupdate-install-test.XXXXXX)
trap 'rm -rf "$t"' EXIT

if make -C "$top" --no-print-directory -s install DESTDIR="$t/root" PREFIX=/usr >"$t/log" 2>&1; then
	ok "make install DESTDIR PREFIX=/usr"
else
	nok "make install: $(tail -5 "$t/log")"
fi
for f in usr/sbin/kupdate usr/lib/systemd/system/kupdate.target \
	usr/lib/systemd/system/kupdate-netlock.service usr/lib/systemd/system/kupdate-finish.service \
	usr/lib/systemd/system-generators/kupdate-generator usr/share/man/man8/kupdate.8 \
	usr/share/man/man7/kupdate.target.7 usr/share/man/man5/kupdate-images.5 \
	usr/share/bash-completion/completions/kupdate usr/share/kupdate/proto/inventory.proto \
	usr/share/kupdate/proto/cycle.proto usr/share/initramfs-tools/scripts/init-top/kupdate; do
	[ -e "$t/root/$f" ] || [ -L "$t/root/$f" ] && ok "installs /$f" || nok "does not install /$f"
done
grep -q '^ExecStart=/usr/sbin/kupdate finish' "$t/root/usr/lib/systemd/system/kupdate-finish.service" &&
	ok "units name the installed binary" || nok "units: $(grep ExecStart "$t/root/usr/lib/systemd/system/kupdate-finish.service")"
[ "$(readlink "$t/root/usr/lib/systemd/system-generators/kupdate-generator")" = /usr/sbin/kupdate ] &&
	ok "the generator links to /usr/sbin/kupdate" || nok "generator link"
grep -q '/usr/lib/systemd/system-generators/kupdate' "$t/root/usr/share/man/man7/kupdate.target.7" &&
	ok "kupdate.target(7) names the installed paths" || nok "kupdate.target(7) paths"

# the initramfs hook on a stand-in /proc
hook=$t/root/usr/share/initramfs-tools/scripts/init-top/kupdate
proc=$t/proc
mkdir -p "$proc/sys/kernel"
run_hook() { # CMDLINE LAST_PID [patched]
	echo "$1" >"$proc/cmdline"
	echo "$2" >"$proc/sys/kernel/ns_last_pid"
	rm -f "$proc/sys/kernel/pid_reserve"
	[ "${3:-}" = patched ] && echo "" >"$proc/sys/kernel/pid_reserve"
	KUPDATE_PROC=$proc sh "$hook" >/dev/null 2>&1
	cat "$proc/sys/kernel/ns_last_pid"
}
[ "$("$hook" prereqs)" = "" ] && ok "hook: prereqs" || nok "hook: prereqs"
[ "$(run_hook "ro kupdate.cycle=X pid_reserve=300-310,5000-5099,20000" 120)" = 20000 ] &&
	ok "hook: unpatched kernel, cycle: ns_last_pid raised to the highest saved pid" || nok "hook: not raised"
[ "$(run_hook "ro kupdate.cycle=X pid_reserve=300-310,5000-5099" 120 patched)" = 120 ] &&
	ok "hook: patched kernel: nothing" || nok "hook: patched kernel changed ns_last_pid"
[ "$(run_hook "ro pid_reserve=300-310" 120)" = 120 ] && ok "hook: no cycle: nothing" || nok "hook: no cycle"
[ "$(run_hook "ro kupdate.cycle=X pid_reserve=300-310" 9000)" = 9000 ] &&
	ok "hook: never lowers ns_last_pid" || nok "hook: lowered ns_last_pid"
[ "$(run_hook "ro kupdate.cycle=X pid_reserve=junk,7-x,400" 10)" = 400 ] &&
	ok "hook: skips bad ranges" || nok "hook: bad ranges"
echo "1..$n"
exit $failed
