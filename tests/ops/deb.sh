#!/bin/bash
# usage: tests/ops/deb.sh — builds the kupdate .deb with
# `dpkg-buildpackage -us -uc -b` from a copy of the tree (build-deb.sh),
# then looks inside: every part where Debian expects it, dependencies from the
# libraries, the unit enabled by the maintainer scripts, the initramfs
# trigger, and the packaged binary runs (TAP).
set -u
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
t=$(mktemp -d /tmp/kupdate-deb-test.XXXXXX)
trap 'rm -rf "$t"' EXIT

start=$(date +%s)
if deb=$("$(dirname "$0")/build-deb.sh" "$t/out"); then
	ok "dpkg-buildpackage -us -uc -b ($(($(date +%s) - start)) s)"
else
	nok "dpkg-buildpackage failed: $(tail -15 "$t/out/build.log" | sed 's/^/# /')"
	echo "1..$n"
	exit 1
fi
[ -s "$deb" ] && ok "built $(basename "$deb") ($(stat -c %s "$deb") bytes)" || { nok "no .deb"; exit 1; }
dpkg-deb -c "$deb" >"$t/contents"
for f in ./usr/sbin/kupdate ./usr/lib/kupdate/kupdate-anchor ./lib/systemd/system/kupdate.target \
	./lib/systemd/system/kupdate-netlock.service ./lib/systemd/system/kupdate-finish.service \
	./lib/systemd/system-generators/kupdate-generator ./usr/share/man/man8/kupdate.8.gz \
	./usr/share/man/man7/kupdate.target.7.gz ./usr/share/man/man5/kupdate-images.5.gz \
	./usr/share/bash-completion/completions/kupdate \
	./usr/share/initramfs-tools/scripts/init-top/kupdate ./usr/share/kupdate/proto/cycle.proto \
	./usr/share/doc/kupdate/copyright ./etc/kernel/postinst.d/zz-kupdate; do
	grep -q " $f\( \|$\)" "$t/contents" && ok "contains $f" || nok "does not contain $f"
done
grep -q ' ./lib/systemd/system-generators/kupdate-generator -> /usr/sbin/kupdate$' "$t/contents" &&
	ok "the generator is a link to /usr/sbin/kupdate" || nok "generator link"
dpkg-deb -f "$deb" Depends >"$t/depends"
for lib in libnftables1 libprotobuf-c1 libjson-c5 libsystemd0 libnl-3-200 systemd; do
	grep -q "$lib" "$t/depends" && ok "Depends on $lib" || nok "Depends lacks $lib: $(cat "$t/depends")"
done
mkdir "$t/ctl"
dpkg-deb -e "$deb" "$t/ctl"
grep -q 'kupdate-finish.service' "$t/ctl/postinst" 2>/dev/null &&
	ok "postinst enables kupdate-finish.service" || nok "postinst does not enable kupdate-finish.service"
grep -q 'systemctl.*start' "$t/ctl/postinst" 2>/dev/null &&
	nok "postinst starts a unit at install" || ok "postinst starts nothing"
grep -q 'update-initramfs' "$t/ctl/triggers" 2>/dev/null &&
	ok "triggers update-initramfs" || nok "no update-initramfs trigger"
grep -qx '/etc/kernel/postinst.d/zz-kupdate' "$t/ctl/conffiles" 2>/dev/null &&
	ok "apt's kernel hook is a conffile (kept on remove, gone on purge)" ||
	nok "the kernel hook is not a conffile: $(cat "$t/ctl/conffiles" 2>/dev/null)"
dpkg-deb -x "$deb" "$t/root"
v=$("$t/root/usr/sbin/kupdate" --version)
[ "$v" = "kupdate $(dpkg-deb -f "$deb" Version)" ] && ok "packaged binary: $v" || nok "packaged binary says '$v'"
"$t/root/usr/sbin/kupdate" check --json >"$t/check.json"
rc=$?
{ [ $rc = 0 ] || [ $rc = 1 ]; } && jq -e .checks "$t/check.json" >/dev/null &&
	ok "packaged kupdate check --json runs (exit $rc)" || nok "packaged check: rc $rc"
grep -q '^/usr/sbin/kupdate kernel-installed "\$@" || true$' "$t/root/etc/kernel/postinst.d/zz-kupdate" &&
	[ -x "$t/root/etc/kernel/postinst.d/zz-kupdate" ] &&
	KUPDATE_WANTS_DIR=$t/nowants sh "$t/root/etc/kernel/postinst.d/zz-kupdate" 99.0.0-1-amd64 /nonexistent >/dev/null 2>&1 &&
	ok "the kernel hook runs /usr/sbin/kupdate kernel-installed and exits 0 (kupdate there or removed)" ||
	nok "the kernel hook: $(cat "$t/root/etc/kernel/postinst.d/zz-kupdate")"
zcat "$t/root/usr/share/man/man8/kupdate.8.gz" | grep -q '^\.TH KUPDATE 8 "[A-Z][a-z]* [0-9]*" "kupdate [0-9.]*"' &&
	ok "man page carries the version and date" || nok "man page header"
echo "1..$n"
exit $failed
