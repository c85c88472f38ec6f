# tests: unit tests (cmocka), checkpoint/restore tests on this host.

TBIN        := $(BUILD)/tests
# the runner, in three files (not test programs)
CRRUN_SRC   := tests/cr/crrun.c tests/cr/crrun-damage.c tests/cr/crrun-net.c tests/cr/crrun-ns.c \
	       tests/cr/crrun-procs.c
CR_PROGS    := $(patsubst tests/cr/%.c,%,$(filter-out tests/cr/crt.c $(CRRUN_SRC),$(wildcard tests/cr/*.c)))
CR_BINS     := $(addprefix $(TBIN)/cr/,$(CR_PROGS)) $(TBIN)/cr/crrun
# test programs: plain C, no sanitizers (they are what gets dumped)
CR_CFLAGS   := -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -Itests/cr

$(TBIN)/cr/crrun: $(CRRUN_SRC) tests/cr/crrun.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $(CRRUN_SRC)

$(TBIN)/cr/%: tests/cr/%.c tests/cr/crt.c tests/cr/crt.h tests/cr/zeropat.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -pthread -o $@ $< tests/cr/crt.c -lm

# The sanitized build of the engine and the tool (ASan + UBSan).
ASAN_BUILD   := $(BUILD)/asan
ASAN_KUPDATE := $(ASAN_BUILD)/bin/kupdate
ASAN_LIBCR   := $(ASAN_BUILD)/lib/libcr.a
.PHONY: asan
asan:
	$(Q)$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) SAN=1 $(ASAN_KUPDATE)

UNIT_SRC    := $(wildcard tests/unit/test_*.c)
UNIT_BINS   := $(patsubst tests/unit/%.c,$(TBIN)/unit/%,$(UNIT_SRC))
$(TBIN)/unit/%: tests/unit/%.c asan
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CSTD) -O1 -g $(WARN) -D_GNU_SOURCE -fsanitize=address,undefined \
		-fno-sanitize-recover=undefined $(PKG_CFLAGS) $(ENGINE_INC) -I$(ASAN_BUILD)/gen \
		-o $@ $< $(ASAN_LIBCR) $(PKG_LIBS) -lcmocka

# the orchestrator's pure parts, from the sanitized build's objects
ASAN_ORCH_OBJ = $(patsubst $(OBJ)/%,$(ASAN_BUILD)/obj/%,$(filter-out %/kupdate.o %/engine_cmds.o,$(ORCH_OBJ))) \
	$(patsubst $(OBJ)/%,$(ASAN_BUILD)/obj/%,$(ORCH_PROTO_OBJ))
$(TBIN)/unit/test_orch $(TBIN)/unit/test_kimage $(TBIN)/unit/test_output: $(TBIN)/unit/%: tests/unit/%.c asan
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CSTD) -O1 -g $(WARN) -D_GNU_SOURCE -fsanitize=address,undefined \
		-fno-sanitize-recover=undefined $(PKG_CFLAGS) $(ENGINE_INC) -Iorchestrator \
		-I$(ASAN_BUILD)/gen/orch-images -I$(ASAN_BUILD)/gen -o $@ $< $(ASAN_ORCH_OBJ) $(ASAN_LIBCR) $(PKG_LIBS) -lcmocka

.PHONY: tests
tests: $(CR_BINS) $(UNIT_BINS)
all: tests

CHECK_SUITES += unit cr cr-asan

.PHONY: check-unit check-cr check-cr-asan
check-unit: $(UNIT_BINS)
	$(Q)tools/run-suite $(BUILD)/results unit tests/unit/run.sh $(UNIT_BINS)

check-cr: $(KUPDATE) $(CR_BINS)
	$(Q)tools/run-suite $(BUILD)/results cr tests/cr/run-tests.sh $(KUPDATE) $(TBIN)/cr

# the same tests driven by the sanitized kupdate (the 1 GiB one is left
# to the plain run: it tests throughput, not code paths; and so is the
# container's restore under a fork storm, whose pids inside a user
# namespace are taken through ns_last_pid, a handoff between two processes
# that a sanitized restore loses to the storm every time: docs/decisions.md)
check-cr-asan: asan $(CR_BINS)
	$(Q)ASAN_OPTIONS=detect_leaks=1 tools/run-suite $(BUILD)/results cr-asan \
		tests/cr/run-tests.sh $(ASAN_KUPDATE) $(TBIN)/cr 'bigmem|ctrroot-userpid-busy'

# The update cycle in QEMU (tests/cycle/cycle.sh): the demo services, the
# host's TCP client, and the payload the guest installs kupdate from.
CYCLE_BINS  := $(TBIN)/cycle/kupdate-demo $(TBIN)/cycle/demo-client \
	$(TBIN)/cycle/stream-client $(TBIN)/cycle/redis-client $(TBIN)/cycle/http-client \
	$(TBIN)/cycle/mysql-client $(TBIN)/cycle/vnc-client
CYCLE_PAYLOAD := $(BUILD)/cycle-payload
$(TBIN)/cycle/kupdate-demo: tests/cycle/demo.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $<
$(TBIN)/cycle/demo-client: tests/cycle/client.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $<
$(TBIN)/cycle/stream-client: tests/cycle/stream.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $<
$(TBIN)/cycle/redis-client: tests/cycle/redis-client.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $<
$(TBIN)/cycle/http-client: tests/cycle/http-client.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $<
$(TBIN)/cycle/mysql-client: tests/cycle/mysql-client.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $<
# VNC authentication is DES: OpenSSL's
$(TBIN)/cycle/vnc-client: tests/cycle/vnc-client.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CR_CFLAGS) -o $@ $< -lcrypto
tests: $(CYCLE_BINS)

.PHONY: cycle-payload cycle cycle-test check-cycle
cycle-payload: $(KUPDATE) $(CYCLE_BINS)
	$(Q)rm -rf $(CYCLE_PAYLOAD)
	$(Q)mkdir -p $(CYCLE_PAYLOAD)/root/usr/local/bin $(CYCLE_PAYLOAD)/root/etc/systemd/system \
		$(CYCLE_PAYLOAD)/extra
	$(Q)$(MAKE) --no-print-directory -s install DESTDIR=$(abspath $(CYCLE_PAYLOAD))/root PREFIX=/usr
	$(Q)install -m 0755 $(TBIN)/cycle/kupdate-demo $(CYCLE_PAYLOAD)/root/usr/local/bin/
	$(Q)cp tests/cycle/units/demo-*.service $(CYCLE_PAYLOAD)/root/etc/systemd/system/
	$(Q)cp tests/cycle/units/kupdate-test-corrupt.service $(CYCLE_PAYLOAD)/extra/

cycle: kernels guest-image $(KQ_HOST) cycle-payload
	$(Q)BUILD=$(BUILD) tests/cycle/cycle.sh

# The three directions (A -> B, B -> A, A -> A') with the demo units and the
# real services: one verdict line per check, then "N passed, N failed".
cycle-test:
	$(Q)tools/deps.sh build test kernel guest
	$(Q)rm -rf $(BUILD)/results-cycle
	$(Q)tools/run-suite $(BUILD)/results-cycle cycle $(MAKE) --no-print-directory -s cycle
	$(Q)tools/summary $(BUILD)/results-cycle cycle

CHECK_SUITES += cycle

# The kernel-dependent checkpoint/restore tests inside the guest, on kernel A
# and on kernel B (tests/cr/guest.sh).
.PHONY: cr-guest check-cr-guest
cr-guest: kernels guest-image $(KQ_HOST) $(KUPDATE) $(CR_BINS)
	$(Q)BUILD=$(BUILD) tests/cr/guest.sh

CHECK_SUITES += cr-guest
check-cr-guest:
	$(Q)tools/deps.sh kernel guest
	$(Q)tools/run-suite $(BUILD)/results cr-guest $(MAKE) --no-print-directory -s cr-guest
check-cycle:
	$(Q)tools/deps.sh kernel guest
	$(Q)tools/run-suite $(BUILD)/results cycle $(MAKE) --no-print-directory -s cycle
include tests/fuzz/fuzz.mk

# Faults at every phase of the cycle, in QEMU (tests/cycle/faults.sh): one
# boot for the faults before the kexec, two kexecs for the boot side.
.PHONY: faults check-faults
faults: kernels guest-image $(KQ_HOST) cycle-payload
	$(Q)BUILD=$(BUILD) tests/cycle/faults.sh

CHECK_SUITES += faults

# The stock cycle (tests/cycle/stock.sh): Debian's own kernel packages
# (kernel/stock/kernels, downloaded into $(KUPDATE_CACHE)/stock), installed
# in the guest with dpkg, K1 -> K2 -> K3 -> K1 through kupdate apply and
# apt's hook, without pid_reserve=.
.PHONY: stock stock-image check-stock
stock: kernels guest-image stock-image $(KQ_HOST) cycle-payload
	$(Q)BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) tests/cycle/stock.sh
# the guest image with the first two kernels installed by dpkg (cached;
# qemu-kexec/rootfs.sh's build_stock), the third is installed in the guest
stock-image: $(KQ_AGENT) guest-image
	$(Q)debs=$$(KUPDATE_CACHE=$(KUPDATE_CACHE) kernel/stock.sh) && \
		set -- $$(sed 's/#.*//' kernel/stock/kernels) && \
		BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) \
		STOCK_DEBS="$$(ls $$debs/$$1_*.deb $$debs/$$2_*.deb)" qemu-kexec/rootfs.sh $(KQ_AGENT)

CHECK_SUITES += stock
check-stock:
	$(Q)tools/deps.sh kernel guest
	$(Q)tools/run-suite $(BUILD)/results stock $(MAKE) --no-print-directory -s stock

# Issue 30's programs across the cycle (tests/cycle/programs.sh): sshd
# with its logind sessions, the apply run from one of them.  The host's
# ssh client logs in (openssh-client).
.PHONY: programs check-programs
programs: kernels guest-image $(KQ_HOST) cycle-payload
	$(Q)BUILD=$(BUILD) tests/cycle/programs.sh

CHECK_SUITES += programs
check-programs:
	$(Q)tools/deps.sh kernel guest
	$(Q)tools/run-suite $(BUILD)/results programs $(MAKE) --no-print-directory -s programs

# The soak (tests/cycle/soak.sh): N cycles in a row, A <-> B, with five
# units and three host clients connected throughout; not in `make check`
# (20-40 s a cycle under emulation).  `make soak N=100`.
N ?= 100
.PHONY: soak soak-run
soak:
	$(Q)tools/deps.sh build test kernel guest
	$(Q)$(MAKE) --no-print-directory soak-run
soak-run: kernels guest-image $(KQ_HOST) cycle-payload
	$(Q)BUILD=$(BUILD) tests/cycle/soak.sh $(N)
check-faults:
	$(Q)tools/deps.sh kernel guest
	$(Q)tools/run-suite $(BUILD)/results faults $(MAKE) --no-print-directory -s faults

# The operator-facing parts (tests/ops/run.sh): kupdate check on this host,
# the man pages against every --help, the bash completion, make install.
CHECK_SUITES += ops
.PHONY: check-ops
check-ops: $(KUPDATE) man
	$(Q)tools/run-suite $(BUILD)/results ops tests/ops/run.sh $(KUPDATE)

# The Debian package (tests/ops/deb.sh): dpkg-buildpackage from a copy of
# the tree, then what the .deb holds; about a minute.
CHECK_SUITES += deb
.PHONY: check-deb
check-deb:
	$(Q)tools/deps.sh build deb
	$(Q)tools/run-suite $(BUILD)/results deb tests/ops/deb.sh

# In QEMU, not part of the default `make check` (about 8 and 15 minutes;
# one QEMU at a time, /tmp/kupdate-qemu.lock): `make check SUITES=deb-cycle`
# installs the .deb in two guests in turn and runs a cycle with it;
# `make check SUITES=fleet` runs docs/fleet's Ansible rolling update on two.
.PHONY: check-deb-cycle check-fleet
check-deb-cycle:
	$(Q)tools/deps.sh build deb kernel guest
	$(Q)$(MAKE) --no-print-directory kernels guest-image qemu-tools $(TBIN)/cycle/kupdate-demo
	$(Q)tools/run-suite $(BUILD)/results deb-cycle tests/ops/deb-cycle.sh 2
check-fleet:
	$(Q)tools/deps.sh build deb kernel guest fleet
	$(Q)$(MAKE) --no-print-directory kernels guest-image qemu-tools $(TBIN)/cycle/kupdate-demo
	$(Q)tools/run-suite $(BUILD)/results fleet tests/ops/fleet.sh
