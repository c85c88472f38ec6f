# kupdate — top-level build.  `make` builds, `make check` runs every test.
# Non-recursive: each part contributes a *.mk fragment.  Outputs go to $(BUILD)
# (ignored by git); heavy artifacts (kernels, guest images) are cached in
# $(KUPDATE_CACHE), keyed by their inputs.

BUILD         ?= build
KUPDATE_CACHE ?= /var/cache/kupdate
CC            ?= gcc
SAN           ?=
V             ?= 0

ifeq ($(V),0)
Q := @
else
Q :=
endif

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wformat=2 -Wmissing-prototypes
CSTD    := -std=gnu11
OPT     ?= -O2 -g
CFLAGS  := $(CSTD) $(OPT) $(WARN) -D_GNU_SOURCE -fno-strict-aliasing -MMD -MP
LDFLAGS :=
ifneq ($(SAN),)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

PKGS        := libprotobuf-c libnl-3.0 libnftables libsystemd zlib liblzma libzstd json-c
PKG_CFLAGS   = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# kupdate itself loads libnftables, libsystemd and the decompressors when
# it needs them (cr-engine/net/netlock.c, orchestrator/sd.c, orchestrator/kimage.c)
KUPDATE_LIBS = $(filter-out -lnftables -lsystemd -lz -llzma -lzstd,$(PKG_LIBS))

# Suites registered by the fragments; `make check` runs them all and
# prints one summary line.
CHECK_SUITES :=

.PHONY: all deps check check-run bench clean format format-check demo
all:

include cr-engine/engine.mk
include orchestrator/orchestrator.mk
include tests/tests.mk
include bench/bench.mk
include doc/doc.mk
-include kernel/kernel.mk
-include initramfs/initramfs.mk
-include qemu-kexec/qemu.mk

deps:
	$(Q)tools/deps.sh build test

# `make check`: install what is missing, build, run every registered suite
# (a failing suite does not stop the others), then print `N passed, N failed`.
# `make check SUITES="unit cr"` runs only those.
SUITES ?= $(CHECK_SUITES)
check: deps
	$(Q)rm -rf $(BUILD)/results && mkdir -p $(BUILD)/results
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory -k $(addprefix check-,$(SUITES)) || true
	$(Q)tools/summary $(BUILD)/results $(SUITES)

# The main job: the whole update cycle in QEMU (see README): kernels A and B,
# the Debian guest, kupdate and the demo services installed in it, a live TCP
# client on this host; prints what survived and the measured downtime.
demo:
	$(Q)tools/deps.sh build test kernel guest
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory kernels guest-image qemu-tools cycle-payload
	$(Q)BUILD=$(BUILD) tests/cycle/cycle.sh --demo

format:
	$(Q)clang-format -i $$(git ls-files '*.c' '*.h' | grep -v '^build/')

format-check:
	$(Q)clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h' | grep -v '^build/')

clean:
	rm -rf $(BUILD)/obj $(BUILD)/asan $(BUILD)/gen $(BUILD)/bin $(BUILD)/results $(BUILD)/tests
