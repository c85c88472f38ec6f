#!/bin/bash
# Run kupdate's kernel selftests (kernel/selftests) inside QEMU: for kernel A
# and kernel B, boot the busybox initramfs guest with the selftest binaries as
# payload and pid_reserve=30-150,5000-5099,20000-20009 on the command line, run each
# binary through the agent, and merge their TAP output into one stream:
#   ok N - <release> <test>: <description>
# A binary that crashes, hangs (timeout) or reports fewer results than it
# planned gets a "not ok" of its own.
#
# usage: qemu-kexec/kselftest.sh SELFTEST_BINARY...
set -uo pipefail
. "$(dirname "$0")/qemu-lock.sh"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$here/vm
RESERVE="30-150,5000-5099,20000-20009"
TEST_TIMEOUT=${TEST_TIMEOUT:-180}

[ $# -gt 0 ] || { echo "usage: kselftest.sh SELFTEST_BINARY..." >&2; exit 2; }
payload=$(mktemp -d)
# on any exit: no VM left running (it would hold the QEMU lock every later
# suite waits for)
trap 'rm -rf "$payload"; [ -n "${name:-}" ] && "$vm" kill "$name" >/dev/null 2>&1' EXIT
cp "$@" "$payload/"

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); echo "not ok $n - $*"; }

for k in A B; do
	name=kselftest-$k-$$ # unique per run
	t0=$(date +%s.%N)
	if ! "$vm" start "$name" --guest busybox --kernel "$k" --payload "$payload" \
		--append "pid_reserve=$RESERVE" 2>"$payload/.start.err"; then
		sed 's/^/# /' "$payload/.start.err"
		notok "kernel $k: boot the busybox guest"
		continue
	fi
	boot=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	rel=$("$vm" run "$name" -t 30 -- uname -r)
	case $k:$rel in
	A:6.1.* | B:6.12.*) ok "kernel $k: booted $rel to the agent in $boot s" ;;
	*) notok "kernel $k: booted release '$rel'" ;;
	esac
	for bin in "$@"; do
		t=$(basename "$bin")
		out=$("$vm" run "$name" -t "$TEST_TIMEOUT" -- "/payload/$t" 2>&1)
		rc=$?
		plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' <<<"$out" | head -1)
		got=0 bad=0
		while IFS= read -r line; do
			case $line in
			"ok "*)
				got=$((got + 1))
				ok "$rel $t: $(sed -E 's/^ok [0-9]+ //' <<<"$line")" ;;
			"not ok "*)
				got=$((got + 1)) bad=$((bad + 1))
				notok "$rel $t: $(sed -E 's/^not ok [0-9]+ //' <<<"$line")" ;;
			"#"* | "Bail out!"*) echo "# $rel $t: ${line#\# }" ;;
			"TAP version"* | 1..*) ;;
			*) echo "# $rel $t: $line" ;;
			esac
		done <<<"$out"
		if [ -z "$plan" ] || [ "$got" != "$plan" ]; then
			notok "$rel $t: planned ${plan:-?} results, got $got (exit status $rc)"
		elif [ "$rc" != 0 ] && [ "$bad" = 0 ]; then
			notok "$rel $t: exit status $rc"
		fi
	done
	if "$vm" stop "$name" 2>/dev/null; then
		ok "kernel $k: clean poweroff"
		rm -rf "${VM_DIR:-$BUILD/vm}/$name"
	else
		notok "kernel $k: clean poweroff"
		tail -20 "$("$vm" log "$name")" | sed 's/^/# serial: /'
	fi
done
echo "1..$n"
