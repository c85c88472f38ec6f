# Sourced first by every script that runs QEMU: one QEMU on this machine at
# a time.  The script runs again under flock(1) on /tmp/kupdate-qemu.lock
# (with its own arguments); a script it starts sees KUPDATE_QEMU_LOCKED and
# does not wait for the lock its caller holds.
# shellcheck shell=bash
if [ -z "${KUPDATE_QEMU_LOCKED:-}" ]; then
	KUPDATE_QEMU_LOCKED=1 exec flock /tmp/kupdate-qemu.lock "$0" "$@"
fi
