# cr-engine: the checkpoint/restore library, its images and the restorer.

ENGINE_DIR   := cr-engine
GEN          := $(BUILD)/gen
OBJ          := $(BUILD)/obj
PROTOS       := $(wildcard $(ENGINE_DIR)/images/*.proto)
PROTO_C      := $(patsubst $(ENGINE_DIR)/images/%.proto,$(GEN)/images/%.pb-c.c,$(PROTOS))
PROTO_H      := $(PROTO_C:.c=.h)
PROTO_OBJ    := $(patsubst $(GEN)/%.c,$(OBJ)/gen/%.o,$(PROTO_C))
# one folder per subsystem (see docs/adding-a-kind.md); include/ is the
# public face the orchestrator builds against
ENGINE_PARTS := base core mem files net task
ENGINE_SRC   := $(foreach d,$(ENGINE_PARTS),$(wildcard $(ENGINE_DIR)/$(d)/*.c))
ENGINE_OBJ   := $(patsubst %.c,$(OBJ)/%.o,$(ENGINE_SRC))
LIBCR        := $(BUILD)/lib/libcr.a
ENGINE_INC   := -I$(ENGINE_DIR)/include $(addprefix -I$(ENGINE_DIR)/,$(ENGINE_PARTS)) -I$(ENGINE_DIR)
ENGINE_CFLAGS = $(CFLAGS) $(PKG_CFLAGS) $(ENGINE_INC) -I$(GEN)

# The restorer blob: freestanding, position independent, not instrumented.
RST_DIR      := $(BUILD)/restorer
RST_CFLAGS   := -std=gnu11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter \
		-ffreestanding -fno-builtin -nostdlib -fPIE -fvisibility=hidden \
		-fno-stack-protector -fno-asynchronous-unwind-tables -fno-unwind-tables \
		-fcf-protection=none -fno-jump-tables -mno-red-zone -I$(ENGINE_DIR)/base

$(GEN)/images/%.pb-c.c $(GEN)/images/%.pb-c.h: $(ENGINE_DIR)/images/%.proto
	@mkdir -p $(GEN)/images
	$(Q)protoc-c --proto_path=$(ENGINE_DIR)/images --c_out=$(GEN)/images $<

$(OBJ)/gen/%.o: $(GEN)/%.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CSTD) $(OPT) $(PKG_CFLAGS) -I$(GEN) -fno-strict-aliasing $(if $(SAN),-fsanitize=address$(comma)undefined) -c $< -o $@

$(OBJ)/$(ENGINE_DIR)/%.o: $(ENGINE_DIR)/%.c $(PROTO_H)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ENGINE_CFLAGS) -c $< -o $@

$(RST_DIR)/restorer.o: $(ENGINE_DIR)/restorer/restorer.c $(ENGINE_DIR)/restorer/restorer.h \
		$(ENGINE_DIR)/restorer/sys.h $(ENGINE_DIR)/base/crc32c-impl.h
	@mkdir -p $(RST_DIR)
	$(Q)gcc $(RST_CFLAGS) -c $< -o $@
	@# absolute relocations would break a blob that runs at any address
	$(Q)if readelf -rW $@ | grep -Eq 'R_X86_64_(64|32|32S|GOTPCREL[A-Z]*) '; then \
		echo "restorer.o has absolute or GOT relocations:"; readelf -rW $@; exit 1; fi

$(RST_DIR)/restorer.bin: $(RST_DIR)/restorer.o $(ENGINE_DIR)/restorer/restorer.lds
	$(Q)ld -static -nostdlib -T $(ENGINE_DIR)/restorer/restorer.lds $< -o $(RST_DIR)/restorer.elf
	$(Q)objcopy -O binary $(RST_DIR)/restorer.elf $@

$(OBJ)/restorer-blob.o: $(RST_DIR)/restorer.bin
	@mkdir -p $(dir $@)
	$(Q)printf '.section .rodata\n.balign 4096\n.globl restorer_blob\nrestorer_blob:\n.incbin "%s"\n.globl restorer_blob_end\nrestorer_blob_end:\n.section .note.GNU-stack,"",@progbits\n' $(abspath $<) > $(RST_DIR)/blob.S
	$(Q)$(CC) -c $(RST_DIR)/blob.S -o $@

$(LIBCR): $(ENGINE_OBJ) $(PROTO_OBJ) $(OBJ)/restorer-blob.o
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

comma := ,
.SECONDARY: $(PROTO_C) $(PROTO_H)
-include $(ENGINE_OBJ:.o=.d)
