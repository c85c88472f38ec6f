#!/bin/bash
# usage: tests/ops/check-host.sh KUPDATE — kupdate check on this host, its
# verdicts compared with what the host really has (its config, /proc, the
# cgroup mount, systemd, nft); TAP.
set -u
k=$1
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
skip() { n=$((n + 1)); echo "ok $n - $* # SKIP"; }
t=$(mktemp -d /tmp/kupdate-check-test.XXXXXX)
trap 'rm -rf "$t"' EXIT
# the checks of this host only: no kernel installed to update into
mkdir "$t/noboot"
export KUPDATE_BOOT_DIR=$t/noboot

"$k" check --json >"$t/out.json" 2>"$t/err"
rc=$?
if jq -e . "$t/out.json" >/dev/null; then ok "check --json is valid JSON"; else nok "check --json is valid JSON"; fi
probe() { jq -r --arg n "$1" '.checks[] | select(.name == $n) | .ok' "$t/out.json"; }
expect() { # NAME true|false WHY
	local got
	got=$(probe "$1")
	if [ "$got" = "$2" ]; then ok "$1: $got, as $3"; else nok "$1: kupdate says $got, but $3"; fi
}

# the exit status, cycle_possible and missing agree with the checks
req_bad=$(jq -r '[.checks[] | select(.required and (.ok | not)) | .name] | join(" ")' "$t/out.json")
miss=$(jq -r '.missing | join(" ")' "$t/out.json")
poss=$(jq -r .cycle_possible "$t/out.json")
if [ "$req_bad" = "$miss" ] && { { [ -z "$req_bad" ] && [ $rc = 0 ] && [ "$poss" = true ]; } ||
	{ [ -n "$req_bad" ] && [ $rc = 1 ] && [ "$poss" = false ]; }; }; then
	ok "exit status $rc, cycle_possible $poss, missing '$miss' agree"
else
	nok "exit status $rc, cycle_possible $poss, missing '$miss', failed required '$req_bad'"
fi
[ "$(jq -r .kernel "$t/out.json")" = "$(uname -r)" ] && ok "kernel release" || nok "kernel release"

cfg() { # OPTION: y, m or empty, from the running kernel's config
	if [ -r /proc/config.gz ]; then
		zcat /proc/config.gz | sed -n "s/^$1=//p"
	elif [ -r "/boot/config-$(uname -r)" ]; then
		sed -n "s/^$1=//p" "/boot/config-$(uname -r)"
	else
		echo unknown
	fi
}
bool() { if "$@"; then echo true; else echo false; fi; }
has_cfg() { local v; v=$(cfg "$1"); [ "$v" = y ] || [ "$v" = m ]; }

if [ "$(cfg CONFIG_KEXEC_FILE)" = unknown ]; then
	skip "no config of the running kernel to compare with"
else
	expect kexec_file_load "$(bool has_cfg CONFIG_KEXEC_FILE)" "CONFIG_KEXEC_FILE=$(cfg CONFIG_KEXEC_FILE)"
	expect soft_dirty "$(bool has_cfg CONFIG_MEM_SOFT_DIRTY)" "CONFIG_MEM_SOFT_DIRTY=$(cfg CONFIG_MEM_SOFT_DIRTY)"
	expect userfaultfd_wp "$(bool has_cfg CONFIG_USERFAULTFD)" "CONFIG_USERFAULTFD=$(cfg CONFIG_USERFAULTFD)"
	expect sock_diag "$(bool has_cfg CONFIG_UNIX_DIAG)" "CONFIG_UNIX_DIAG=$(cfg CONFIG_UNIX_DIAG)"
fi
expect time_namespace "$(bool test -e /proc/self/ns/time)" "/proc/self/ns/time is $(test -e /proc/self/ns/time || echo not) there"
expect pid_reserve "$(bool test -e /proc/sys/kernel/pid_reserve)" "/proc/sys/kernel/pid_reserve is $(test -e /proc/sys/kernel/pid_reserve || echo not) there"
map_files_read() { # this shell's own first mapping
	local first
	first=$(ls /proc/$$/map_files 2>/dev/null | head -1)
	[ -n "$first" ] && [ -n "$(readlink "/proc/$$/map_files/$first")" ]
}
expect map_files "$(bool map_files_read)" "readlink reads /proc/PID/map_files links: $(bool map_files_read)"
fs=$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)
expect cgroup2_freezer "$(bool test "$fs" = cgroup2fs)" "/sys/fs/cgroup is $fs"
pid1=$(cat /proc/1/comm)
if [ "$pid1" = systemd ] && [ -S /run/dbus/system_bus_socket ]; then sd=true; else sd=false; fi
expect systemd "$sd" "PID 1 is $pid1 and the system bus socket is $(test -S /run/dbus/system_bus_socket || echo not) there"
if command -v nft >/dev/null; then
	nftok=$(bool nft -c -f - <<<'add table inet kupdate_check_test
add set inet kupdate_check_test c4 { type ipv4_addr . inet_service . ipv4_addr . inet_service ; }
add chain inet kupdate_check_test in { type filter hook input priority -300 ; policy accept ; }
add rule inet kupdate_check_test in ip saddr . tcp sport . ip daddr . tcp dport @c4 drop')
	expect nftables "$nftok" "nft -c takes such a table: $nftok"
else
	skip "nftables: no nft command to compare with"
fi
maj=$(uname -r | cut -d. -f1) min=$(uname -r | cut -d. -f2)
expect pagemap_scan "$(bool test $((maj * 100 + min)) -ge 607)" "the kernel is $maj.$min (PAGEMAP_SCAN: 6.7)"
if [ "$(id -u)" = 0 ]; then
	expect tcp_repair true "root has CAP_NET_ADMIN"
	expect ptrace true "root can trace its own child"
fi

# libnftables and libsystemd are loaded when needed, not at every start: a
# missing one is named, with the package that brings it
if ldd "$k" | grep -qE 'libnftables|libsystemd'; then
	nok "kupdate starts without libnftables and libsystemd: $(ldd "$k" | grep -oE 'lib(nftables|systemd)[^ ]*' | xargs)"
else
	ok "kupdate starts without libnftables and libsystemd (loaded when needed)"
fi
KUPDATE_LIBNFTABLES=/nonexistent/libnftables.so.1 "$k" check --json >"$t/nonft.json" 2>/dev/null
d=$(jq -r '.checks[] | select(.name == "nftables") | "\(.ok) \(.detail)"' "$t/nonft.json")
case "$d" in
"false "*"cannot load libnftables.so.1"*"install the libnftables1 package"*) ok "without libnftables, the nftables check says so: ${d#false }" ;;
*) nok "without libnftables, the nftables check says: $d" ;;
esac
KUPDATE_LIBSYSTEMD=/nonexistent/libsystemd.so.0 "$k" enable kupdate-test-nosuch.service >"$t/nosd" 2>&1
rc3=$?
if [ $rc3 = 1 ] && grep -q 'cannot load libsystemd.so.0.*install the libsystemd0 package' "$t/nosd"; then
	ok "without libsystemd, kupdate enable fails naming it (exit $rc3)"
else
	nok "without libsystemd, kupdate enable: exit $rc3, $(head -c 300 "$t/nosd")"
fi

# human output: aligned, no escape sequences into a pipe, colours on a terminal
"$k" check >"$t/human" 2>&1
if grep -q $'\e' "$t/human"; then nok "no escape sequences into a pipe"; else ok "no escape sequences into a pipe"; fi
bad=$(grep -E '^  (ok|MISSING|absent) ' "$t/human" | awk '{ if (substr($0, 12, 1) == " " || substr($0, 11, 1) != " ") print }' | head -1)
[ -z "$bad" ] && ok "the status column is aligned" || nok "misaligned: $bad"
lines=$(grep -cE '^  (ok|MISSING|absent) ' "$t/human")
[ "$lines" = "$(jq '.checks | length' "$t/out.json")" ] && ok "one line per check ($lines)" || nok "$lines lines for $(jq '.checks | length' "$t/out.json") checks"
if command -v script >/dev/null; then
	TERM=xterm script -qec "$k check" /dev/null >"$t/tty" 2>&1
	grep -q $'\e\[' "$t/tty" && ok "colours on a terminal" || nok "no colours on a terminal"
	NO_COLOR=1 TERM=xterm script -qec "$k check" /dev/null >"$t/tty2" 2>&1
	grep -q $'\e\[' "$t/tty2" && nok "NO_COLOR ignored" || ok "NO_COLOR: no colours"
else
	skip "no script(1) for a terminal"
fi

# a config file as the target: /proc/config.gz of this very kernel
if [ -r /proc/config.gz ]; then
	"$k" check --json /proc/config.gz >"$t/cfg.json"
	rc2=$?
	tgt() { jq -r --arg n "$1" '.target.checks[] | select(.name == $n) | .enabled' "$t/cfg.json"; }
	same=1
	for c in kexec_file_load soft_dirty time_namespace map_files userfaultfd_wp; do
		[ "$(tgt $c)" = "$(probe $c)" ] || { same=0; echo "# $c: config says $(tgt $c), probe $(probe $c)"; }
	done
	[ $same = 1 ] && ok "/proc/config.gz as target agrees with the probes" || nok "/proc/config.gz as target disagrees with the probes"
	[ "$(jq -r .target.kind "$t/cfg.json")" = config ] && [ "$(jq -r .target.compression "$t/cfg.json")" = gzip ] &&
		ok "/proc/config.gz read as a gzipped config" || nok "/proc/config.gz kind/compression"
	tbad=$(jq -r '[.target.checks[] | select(.required and .enabled == false)] | length' "$t/cfg.json")
	if { [ "$tbad" = 0 ] && [ "$rc2" = "$rc" ]; } || { [ "$tbad" != 0 ] && [ $rc2 = 1 ]; }; then
		ok "exit status with a target ($rc2)"
	else
		nok "exit status with a target: $rc2 ($tbad required options off)"
	fi
else
	skip "no /proc/config.gz"
fi

# a guest kernel built by make kernels, when the cache has one
bz=$(ls -1 "${KUPDATE_CACHE:-/var/cache/kupdate}"/kernels/6.12-*/bzImage 2>/dev/null | head -1)
if [ -n "$bz" ]; then
	"$k" check --json "$bz" >"$t/bz.json"
	rel=$(cat "$(dirname "$bz")/release" 2>/dev/null)
	[ "$(jq -r .target.kind "$t/bz.json")" = bzImage ] &&
		[ "$(jq -r .target.config_source "$t/bz.json")" = IKCONFIG ] &&
		[ "$(jq -r .target.pid_reserve_patch "$t/bz.json")" = true ] &&
		[ -z "$rel" -o "$(jq -r .target.release "$t/bz.json")" = "$rel" ] &&
		[ "$(jq -r '.target.checks[] | select(.name == "kexec_file_load") | .enabled' "$t/bz.json")" = true ] &&
		ok "guest bzImage: IKCONFIG read, release $rel, pid_reserve patch, KEXEC_FILE" ||
		nok "guest bzImage $bz: $(jq -c '.target | del(.checks)' "$t/bz.json")"
else
	skip "no guest bzImage in the kernel cache"
fi

# without a kernel named: the newest installed in /boot, as apt puts them
mkbz() { # FILE RELEASE: a bzImage header naming RELEASE, with a payload no one reads
	head -c 4096 /dev/zero >"$1"
	put() { printf "$2" | dd of="$1" bs=1 seek=$(($3)) conv=notrunc status=none; }
	put "$1" '\x03' 0x1f1             # setup sectors: the payload starts at 2048
	put "$1" 'HdrS\x0f\x02' 0x202     # boot protocol 2.15
	put "$1" '\x00\x02' 0x20e         # its version string at 0x400
	put "$1" "$2 (kupdate test) #1\\0" 0x400
	put "$1" '\x00\x00\x00\x00\x10\x00\x00\x00' 0x248 # 16 bytes of payload, all zeros
}
newest=99.12.57+deb12-amd64
mkdir "$t/boot" "$t/oldboot"
mkbz "$t/boot/vmlinuz-6.1.0-47-amd64" 6.1.0-47-amd64
mkbz "$t/boot/vmlinuz-$newest" "$newest"
mkbz "$t/boot/vmlinuz-99.99.0-1-amd64.dpkg-tmp" 99.99.0-1-amd64
echo 'initrd' >"$t/boot/initrd.img-$newest"
mkbz "$t/oldboot/vmlinuz-1.0.0-1-amd64" 1.0.0-1-amd64
if [ -r /proc/config.gz ]; then zcat /proc/config.gz; else cat "/boot/config-$(uname -r)"; fi \
	>"$t/boot/config-$newest" 2>/dev/null
KUPDATE_BOOT_DIR=$t/boot "$k" check --json >"$t/next.json" 2>"$t/next.err"
[ "$(jq -r .target.path "$t/next.json")" = "$t/boot/vmlinuz-$newest" ] &&
	[ "$(jq -r .target.release "$t/next.json")" = "$newest" ] &&
	ok "check without a kernel: the newest installed ($newest, not a .dpkg-tmp one)" ||
	nok "check without a kernel: target $(jq -c '.target | del(.checks)' "$t/next.json") $(cat "$t/next.err")"
if [ -s "$t/boot/config-$newest" ]; then
	[ "$(jq -r .target.config_source "$t/next.json")" = "file beside the image" ] &&
		ok "an image without IKCONFIG: its config-RELEASE beside it is read" ||
		nok "an image without IKCONFIG: config_source $(jq -r .target.config_source "$t/next.json")"
else
	skip "no config of this kernel to put beside the image"
fi
KUPDATE_BOOT_DIR=$t/boot "$k" check >"$t/next.txt" 2>&1
grep -q "checking the newest kernel installed, $newest ($t/boot/vmlinuz-$newest)" "$t/next.txt" &&
	ok "check without a kernel says which one it checks" || nok "check without a kernel: $(head -3 "$t/next.txt")"
KUPDATE_BOOT_DIR=$t/oldboot "$k" check --json >"$t/old.json" 2>&1
[ "$(jq -r .target "$t/old.json")" = null ] && ok "check without a newer kernel installed: this kernel only" ||
	nok "check with only an older kernel installed: target $(jq -c .target "$t/old.json")"
# apply goes no further than its units here (none of them exists)
KUPDATE_BOOT_DIR=$t/boot "$k" apply --unit kupdate-no-such-unit.service >"$t/apply.out" 2>&1
rc4=$?
[ $rc4 = 1 ] && grep -q "updating into the newest kernel installed, $newest ($t/boot/vmlinuz-$newest, initrd $t/boot/initrd.img-$newest)" "$t/apply.out" &&
	ok "apply without a kernel: the newest installed, with its initrd" ||
	nok "apply without a kernel (exit $rc4): $(head -3 "$t/apply.out")"
KUPDATE_BOOT_DIR=$t/oldboot "$k" apply --unit kupdate-no-such-unit.service >"$t/apply2.out" 2>&1
rc4=$?
[ $rc4 = 1 ] && grep -q "no kernel newer than the running one ($(uname -r)) is installed in $t/oldboot; the newest is 1.0.0-1-amd64: name the kernel" "$t/apply2.out" &&
	ok "apply without a kernel, none newer installed: exit 1, saying so" ||
	nok "apply without a kernel, none newer (exit $rc4): $(head -3 "$t/apply2.out")"

# apt's hook: kupdate kernel-installed VERSION IMAGE (the cycle test runs the
# scheduling on a guest whose checks pass; never here)
mkdir "$t/wants" "$t/nowants"
ln -s /dev/null "$t/wants/demo-a.service"
ln -s /dev/null "$t/wants/demo-b.service"
printf '# kupdate.conf\nauto-apply = yes\nbogus = 1\n' >"$t/conf"
KUPDATE_WANTS_DIR=$t/nowants "$k" kernel-installed 99.1.0-1-amd64 "$t/boot/vmlinuz-$newest" >"$t/hook0" 2>&1
rc5=$?
[ $rc5 = 0 ] && grep -q 'linux 99.1.0-1-amd64 installed; no unit is preserved across kernel updates (kupdate enable UNIT)' "$t/hook0" &&
	ok "kernel-installed with no preserved unit: says so, exit 0" || nok "kernel-installed, no unit (exit $rc5): $(cat "$t/hook0")"
KUPDATE_WANTS_DIR=$t/wants KUPDATE_BOOT_DIR=$t/boot KUPDATE_CONF=$t/conf KUPDATE_SYSTEMD_RUN=/bin/false \
	"$k" kernel-installed 6.1.0-47-amd64 "$t/boot/vmlinuz-6.1.0-47-amd64" >"$t/hook1" 2>&1
rc5=$?
grep -q '2 units are preserved across kernel updates (demo-a.service, demo-b.service)' "$t/hook1" &&
	grep -q "not the newest kernel installed: kupdate apply would update into $newest" "$t/hook1" &&
	grep -q "conf:3: unknown setting 'bogus'" "$t/hook1" && [ $rc5 = 0 ] &&
	ok "kernel-installed: names the preserved units, an older kernel, a bad setting; exit 0" ||
	nok "kernel-installed (exit $rc5): $(cat "$t/hook1")"
if [ "$rc" = 0 ]; then
	skip "this host can run a cycle: the hook's refusal is not seen here"
else
	miss=$(jq -r '.missing | join(", ")' "$t/out.json")
	grep -q "it cannot replace the running kernel without restarting them: $miss missing" "$t/hook1" &&
		grep -q "auto-apply is on ($t/conf), but nothing was scheduled" "$t/hook1" &&
		ok "kernel-installed where no cycle can run: names what is missing ($miss), schedules nothing" ||
		nok "kernel-installed where no cycle can run: $(cat "$t/hook1")"
fi
# apply --after-apt waits while dpkg's lock is held (fcntl, as apt takes it)
: >"$t/dpkg-lock"
perl -e '$| = 1; use Fcntl; open(my $f, ">>", $ARGV[0]) or die; my $l = pack("s s x4 q q i x4", F_WRLCK, 0, 0, 0, 0); fcntl($f, F_SETLKW, $l) or die; print "locked\n"; sleep 3' \
	"$t/dpkg-lock" >"$t/locker" &
locker=$!
for i in $(seq 50); do grep -q locked "$t/locker" && break; sleep 0.1; done
KUPDATE_DPKG_LOCK=$t/dpkg-lock "$k" apply --after-apt --unit kupdate-no-such-unit.service /nonexistent >"$t/after" 2>&1
rc5=$?
wait $locker
grep -q "waiting for apt or dpkg (pid $locker, holding $t/dpkg-lock) to finish, at most 1800 s" "$t/after" && [ $rc5 = 1 ] &&
	[ "$(grep -c . "$t/after")" -ge 2 ] &&
	ok "apply --after-apt waits for dpkg's lock, then goes on" || nok "apply --after-apt (exit $rc5): $(cat "$t/after")"

# a Debian kernel (kernel/stock.sh downloads the stock cycle's packages,
# once): no IKCONFIG, its config-RELEASE beside it, no pid_reserve= patch,
# nf_tables and the socket diagnostics built as modules; the modules the
# cycle needs looked for in its /lib/modules (here a tree of our own,
# KUPDATE_MODULES_DIR): there, enabled; one file gone, MISSING naming it
if debs=$("$(dirname "$0")/../../kernel/stock.sh" 2>"$t/stock.err"); then
	d=$(ls "$debs"/linux-image-6.1.0-*-cloud-amd64_*.deb | head -1)
	rel=$(basename "$d" | sed 's/^linux-image-\([^_]*\)_.*/\1/')
	mkdir -p "$t/deb"
	dpkg-deb --fsys-tarfile "$d" | tar -x -C "$t/deb" ./boot
	mods=$t/modules/$rel
	mkdir -p "$mods/kernel/net/netfilter" "$mods/kernel/net/unix" "$mods/kernel/net/ipv4"
	for m in netfilter/nf_tables unix/unix_diag ipv4/inet_diag ipv4/tcp_diag; do
		: >"$mods/kernel/net/$m.ko.xz"
		echo "kernel/net/$m.ko.xz:" >>"$mods/modules.dep"
	done
	# a module that depends on nf_tables: its line names it after the colon
	echo "kernel/net/netfilter/nft_ct.ko.xz: kernel/net/netfilter/nf_tables.ko.xz" >>"$mods/modules.dep"
	KUPDATE_MODULES_DIR=$t/modules "$k" check --json "$t/deb/boot/vmlinuz-$rel" >"$t/deb.json" 2>"$t/deb.err"
	rc6=$?
	dt() { jq -r --arg n "$1" --arg f "$2" '.target.checks[] | select(.name == $n) | .[$f]' "$t/deb.json"; }
	[ "$(jq -r .target.pid_reserve_patch "$t/deb.json")" = false ] &&
		[ "$(jq -r .target.release "$t/deb.json")" = "$rel" ] &&
		[ "$(dt nftables value)" = m ] && [ "$(dt nftables enabled)" = true ] &&
		[ "$(dt sock_diag_inet enabled)" = true ] && [ "$(dt sock_diag enabled)" = true ] &&
		[ "$(dt nftables module_missing)" = null ] &&
		ok "Debian's $rel: no pid_reserve patch; nf_tables, inet_diag, unix_diag modules found in its modules tree (exit $rc6)" ||
		nok "Debian's $rel (exit $rc6): $(jq -c '.target | del(.checks)' "$t/deb.json"); $(cat "$t/deb.err")"
	rm "$mods/kernel/net/netfilter/nf_tables.ko.xz"
	KUPDATE_MODULES_DIR=$t/modules "$k" check "$t/deb/boot/vmlinuz-$rel" >"$t/deb.txt" 2>&1
	rc7=$?
	grep -q "MISSING *nftables *CONFIG_NF_TABLES=m, but module nf_tables: $mods/kernel/net/netfilter/nf_tables.ko.xz: No such file" "$t/deb.txt" &&
		[ $rc7 = 1 ] && ok "its nf_tables module file gone: MISSING, naming the module and the file (exit 1)" ||
		nok "nf_tables module file gone (exit $rc7): $(grep -i nftables "$t/deb.txt")"
	sed -i '/nf_tables.ko.xz:$/d' "$mods/modules.dep"
	KUPDATE_MODULES_DIR=$t/modules "$k" check --json "$t/deb/boot/vmlinuz-$rel" >"$t/deb2.json" 2>/dev/null
	[ "$(jq -r '.target.checks[] | select(.name == "nftables") | .module_missing' "$t/deb2.json")" = "module nf_tables is not in $mods/modules.dep" ] &&
		jq -e '.missing | index("target:nftables")' "$t/deb2.json" >/dev/null &&
		ok "nf_tables not in modules.dep (only another module's dependency names it): missing" ||
		nok "nf_tables not in modules.dep: $(jq -c '.target.checks[] | select(.name == "nftables")' "$t/deb2.json")"
	KUPDATE_MODULES_DIR=$t/none "$k" check "$t/deb/boot/vmlinuz-$rel" >"$t/deb3.txt" 2>&1
	grep -q "CONFIG_NF_TABLES=m, but its modules are not installed (no $t/none/$rel/modules.dep)" "$t/deb3.txt" &&
		ok "no modules installed for it: said so" || nok "no modules tree: $(grep -i nftables "$t/deb3.txt")"
else
	sed 's/^/# /' "$t/stock.err"
	nok "download a Debian kernel package (kernel/stock.sh)"
fi

# refusals
echo "not a kernel" >"$t/junk"
"$k" check "$t/junk" >/dev/null 2>"$t/err2"
rc3=$?
[ $rc3 = 1 ] && grep -q "not a kernel image" "$t/err2" && ok "a file that is no kernel: exit 1 with a reason" || nok "junk target: rc $rc3: $(cat "$t/err2")"
"$k" check a b >/dev/null 2>&1
[ $? = 2 ] && ok "two targets: usage error (2)" || nok "two targets: not a usage error"
echo "1..$n"
exit $failed
