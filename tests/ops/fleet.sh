#!/bin/bash
# usage: tests/ops/fleet.sh — docs/fleet's Ansible rolling update, run for
# real by ansible-playbook on two QEMU guests (one after the other, serial:
# 1) through the kqvm connection (tests/ops/fleet/): kupdate installed from
# its .deb, the per-machine tasks of docs/fleet/kupdate-update-tasks.yml
# (pre-checks, kupdate apply, kexec, post-checks with a health command).
# Then a roll whose first machine fails its health check: the second is
# never touched.  The whole run holds /tmp/kupdate-qemu.lock. TAP.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
export BUILD
vm=$top/qemu-kexec/vm
work=$(mktemp -d /tmp/kupdate-fleet.XXXXXX)
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
names=()
finish() {
	for v in "${names[@]}"; do "$vm" kill "$v" >/dev/null 2>&1; rm -rf "${VM_DIR:-$BUILD/vm}/$v"; done
	rm -rf "$work"
	echo "1..$n"
	exit $((failed > 0))
}
trap finish INT TERM

command -v ansible-playbook >/dev/null || {
	echo "ok 1 - # SKIP no ansible-playbook (tools/deps.sh fleet)"
	echo "1..1"
	exit 0
}
t0=$(date +%s)
deb=$("$here/build-deb.sh" "$work/payload") || {
	notok "build the .deb: $(tail -5 "$work/payload/build.log")"
	finish
}
ok "built $(basename "$deb") in $(($(date +%s) - t0)) s"
mkdir -p "$work/payload/extra"
cp "$BUILD/tests/cycle/kupdate-demo" "$top/tests/cycle/units/demo-counter.service" "$work/payload/extra/" ||
	{ notok "payload: make build/tests/cycle/kupdate-demo"; finish; }

inventory() { # FILE HEALTH1 HEALTH2
	cat >"$1" <<EOI
kupdate_fleet:
  hosts:
    fleet1:
      kqvm_name: fleet-$$-1
      kupdate_health_commands: ["$2"]
    fleet2:
      kqvm_name: fleet-$$-2
      kupdate_health_commands: ["$3"]
  vars:
    ansible_connection: kqvm
    kqvm_tool: $vm
    kqvm_payload: $work/payload
    kupdate_kernel: /payload/boot/bzImage-B
    kupdate_wait_for_connection: false
EOI
}
names=("fleet-$$-1" "fleet-$$-2")
health="kupdate-demo query /run/demo-counter.sock check | grep -q '^ok '"
export ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_HOME=$work/ansible \
	ANSIBLE_LOCAL_TEMP=$work/ansible/tmp ANSIBLE_STDOUT_CALLBACK=default

play() { # INVENTORY LOG
	flock /tmp/kupdate-qemu.lock ansible-playbook -i "$1" "$here/fleet/qemu-rolling.yml" >"$2" 2>&1
}
recap() { # LOG HOST: "ok=N changed=N unreachable=N failed=N ..."
	sed -n "s/^$2 *: //p" "$1" | tr -s ' '
}

# 1. both machines
inventory "$work/inv1.yml" "$health" "$health"
t0=$(date +%s)
play "$work/inv1.yml" "$work/play1.log"
rc=$?
secs=$(($(date +%s) - t0))
grep -E '^(TASK|PLAY|fatal|failed)|restored: ' "$work/play1.log" | sed 's/^/# /' | tail -60
r1=$(recap "$work/play1.log" fleet1) r2=$(recap "$work/play1.log" fleet2)
[ $rc = 0 ] && ok "ansible-playbook rolled both machines in $secs s" || notok "ansible-playbook exit $rc"
for h in fleet1 fleet2; do
	r=$(recap "$work/play1.log" $h)
	[[ $r == *" unreachable=0 failed=0 "* && $r != "ok=0 "* ]] && ok "$h: updated and healthy ($r)" ||
		notok "$h: $r"
done
grep -q 'restored: demo-counter.service' "$work/play1.log" && ok "post-check: demo-counter restored on each" ||
	notok "no 'restored' post-check"
order=$(grep -oE '^(ok|changed): \[fleet[12]' "$work/play1.log" | grep -o 'fleet[12]' | uniq | xargs)
[ "$order" = "fleet1 fleet2" ] && ok "one machine after the other (serial: 1): $order" || notok "order: $order"

# whatever a failed run left running
for v in "${names[@]}"; do "$vm" kill "$v" >/dev/null 2>&1; done

# 2. the first machine fails its health check after the update: the roll stops
inventory "$work/inv2.yml" "false" "$health"
play "$work/inv2.yml" "$work/play2.log"
rc=$?
grep -E '^(fatal|failed)|NO MORE HOSTS' "$work/play2.log" | sed 's/^/# /' | head -10
[ $rc != 0 ] && ok "a failed health check fails the play (exit $rc)" || notok "the play succeeded"
grep -q 'Post | the services' "$work/play2.log" && grep -qE '^failed: \[fleet1\]' "$work/play2.log" &&
	ok "fleet1 failed at its health check" || notok "fleet1 did not fail at the health check"
grep -qE '\[fleet2\]' "$work/play2.log" && notok "fleet2 was touched after fleet1 failed" ||
	ok "fleet2 was never touched"
"$vm" kill "fleet-$$-1" >/dev/null 2>&1
finish
