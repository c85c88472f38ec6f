# qemu-kexec/: the guest agent and its host client, the Debian guest image,
# the `vm` harness (qemu-kexec/README.md) and the kexec smoke test.
#
#   make qemu-tools     $(BUILD)/qemu/kq (host) and kq-agent (guest, static)
#   make guest-image    Debian guest root filesystem (cached, rootfs.sh)
#   make kexec-smoke    A -> B -> A through kexec inside the Debian guest; TAP

KQ_HOST     := $(BUILD)/qemu/kq
KQ_AGENT    := $(BUILD)/qemu/kq-agent
KQ_CFLAGS   := -std=gnu11 -O2 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wmissing-prototypes \
	       -D_GNU_SOURCE
# rebuilt when the agent, the overlay, the package list or the script change
GUEST_IMAGE_STAMP := $(BUILD)/qemu/rootfs.stamp
GUEST_INPUTS := qemu-kexec/rootfs.sh qemu-kexec/guest/packages qemu-kexec/guest/machine-packages \
	$(shell find qemu-kexec/guest/overlay -type f 2>/dev/null)

.PHONY: qemu-tools guest-image kexec-smoke check-kexec-smoke guest-deps

guest-deps:
	$(Q)tools/deps.sh guest

qemu-tools: $(KQ_HOST) $(KQ_AGENT)

$(KQ_HOST): qemu-kexec/kq.c qemu-kexec/kq-proto.h
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(KQ_CFLAGS) -o $@ $<

$(KQ_AGENT): qemu-kexec/kq-agent.c qemu-kexec/kq-proto.h
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(KQ_CFLAGS) -static -o $@ $<

guest-image: $(GUEST_IMAGE_STAMP)

$(GUEST_IMAGE_STAMP): $(KQ_AGENT) $(GUEST_INPUTS)
	$(Q)BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) qemu-kexec/rootfs.sh $(KQ_AGENT)
	$(Q)touch $@

kexec-smoke: kernels guest-image initramfs $(KQ_HOST)
	$(Q)BUILD=$(BUILD) KUPDATE_CACHE=$(KUPDATE_CACHE) qemu-kexec/kexec-smoke.sh

CHECK_SUITES += kexec-smoke
check-kexec-smoke:
	$(Q)tools/deps.sh kernel guest
	$(Q)tools/run-suite $(BUILD)/results kexec-smoke \
		$(MAKE) --no-print-directory -s kexec-smoke

all: qemu-tools

# `make clean` also drops the guest tools, selftest binaries, initramfs and VM
# state (not the unpacked kernel trees under $(BUILD)/kernel, nor the cache).
.PHONY: clean-qemu-kexec
clean: clean-qemu-kexec
clean-qemu-kexec:
	rm -rf $(BUILD)/kselftest $(BUILD)/qemu $(BUILD)/initramfs $(BUILD)/vm
