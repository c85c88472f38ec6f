# kernel/: the two guest kernels (A = 6.1, B = 6.12) and the selftests of the
# kernel interfaces kupdate relies on.  Included by the top-level Makefile.
#
#   make kernels            build (or take from $(KUPDATE_CACHE)/kernels) the bzImages
#                           of A, B and A' (A plus one patch)
#   make kernel-selftests   build the static selftest binaries into $(BUILD)/kselftest
#   make kernel-selftest    run them in QEMU (busybox initramfs) on kernel A and B
#
# Other parts use $(KERNEL_A) / $(KERNEL_B) (symlinks into the cache).

KERNEL_A_VER := 6.1
KERNEL_B_VER := 6.12
# A': kernel A's version and series plus one patch (kernel/patches/6.1+fix1)
KERNEL_A2_VER := 6.1+fix1
KERNEL_A     := $(BUILD)/kernel/$(KERNEL_A_VER)/bzImage
KERNEL_B     := $(BUILD)/kernel/$(KERNEL_B_VER)/bzImage
KERNEL_A2    := $(BUILD)/kernel/$(KERNEL_A2_VER)/bzImage

KSELFTEST_DIR  := $(BUILD)/kselftest
KSELFTEST_SRCS := $(wildcard kernel/selftests/*.c)
KSELFTESTS     := $(patsubst kernel/selftests/%.c,$(KSELFTEST_DIR)/%,$(KSELFTEST_SRCS))
KSELFTEST_CFLAGS := -std=gnu11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -static -pthread

.PHONY: kernels kernel-selftests kernel-selftest check-kernel-selftest kernel-deps

kernel-deps:
	$(Q)tools/deps.sh kernel

kernels: kernel-deps
	$(Q)BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) kernel/build.sh $(KERNEL_A_VER)
	$(Q)BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) kernel/build.sh $(KERNEL_B_VER)
	$(Q)BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) kernel/build.sh $(KERNEL_A2_VER)

kernel-selftests: $(KSELFTESTS)

$(KSELFTEST_DIR)/%: kernel/selftests/%.c kernel/selftests/ktap.h kernel/selftests/util.h
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(KSELFTEST_CFLAGS) -o $@ $<

# Boots each kernel with the busybox initramfs and runs every selftest; TAP.
kernel-selftest: kernels kernel-selftests initramfs qemu-tools
	$(Q)BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) qemu-kexec/kselftest.sh $(KSELFTESTS)

CHECK_SUITES += kernel-selftest
check-kernel-selftest:
	$(Q)tools/deps.sh kernel guest
	$(Q)tools/run-suite $(BUILD)/results kernel-selftest \
		$(MAKE) --no-print-directory -s kernel-selftest

# The selftest binaries are part of the normal build (warning-free, static).
all: kernel-selftests
