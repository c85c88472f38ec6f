# initramfs/: the busybox initramfs guest (fast kernel tests; room for the
# orchestrator's early-boot hook in /etc/kupdate/hooks.d).  Needs the guest
# root filesystem for its kexec binary and libraries.
INITRAMFS := $(BUILD)/initramfs/initramfs.cpio.gz

.PHONY: initramfs
initramfs: $(INITRAMFS)

$(INITRAMFS): initramfs/build.sh initramfs/rcS initramfs/inittab $(BUILD)/qemu/kq-agent \
		$(BUILD)/qemu/rootfs.stamp
	$(Q)initramfs/build.sh $@ $(BUILD)/qemu/kq-agent $(BUILD)/qemu/rootfs-base
