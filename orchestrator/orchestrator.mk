# orchestrator: the kupdate command.
KUPDATE      := $(BUILD)/bin/kupdate
ORCH_SRC     := $(wildcard orchestrator/*.c)
ORCH_OBJ     := $(patsubst %.c,$(OBJ)/%.o,$(ORCH_SRC))
ORCH_PROTOS  := $(wildcard orchestrator/images/*.proto)
ORCH_PROTO_C := $(patsubst orchestrator/images/%.proto,$(GEN)/orch-images/%.pb-c.c,$(ORCH_PROTOS))
ORCH_PROTO_H := $(ORCH_PROTO_C:.c=.h)
ORCH_PROTO_OBJ := $(patsubst $(GEN)/%.c,$(OBJ)/gen/%.o,$(ORCH_PROTO_C))

$(GEN)/orch-images/%.pb-c.c $(GEN)/orch-images/%.pb-c.h: orchestrator/images/%.proto
	@mkdir -p $(GEN)/orch-images
	$(Q)protoc-c --proto_path=orchestrator/images --c_out=$(GEN)/orch-images $<

# the engine's public face only (cr-engine/include), never its internals
ORCH_INC     := -Iorchestrator -I$(ENGINE_DIR)/include -I$(GEN)/orch-images
ORCH_CFLAGS   = $(CFLAGS) $(PKG_CFLAGS) $(ORCH_INC) -DKUPDATE_LIBDIR='"$(PREFIX)/lib/kupdate"'

$(OBJ)/orchestrator/%.o: orchestrator/%.c $(ORCH_PROTO_H)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ORCH_CFLAGS) -c $< -o $@

$(KUPDATE): $(ORCH_OBJ) $(ORCH_PROTO_OBJ) $(LIBCR)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(ORCH_OBJ) $(ORCH_PROTO_OBJ) $(LIBCR) $(KUPDATE_LIBS)

# the unit's namespaces in the boot that restores it (anchor/kupdate-anchor.c)
ANCHOR       := $(BUILD)/bin/kupdate-anchor
$(ANCHOR): orchestrator/anchor/kupdate-anchor.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $(LDFLAGS) -o $@ $<

all: $(KUPDATE) $(ANCHOR)
.PHONY: kupdate
kupdate: $(KUPDATE)
.SECONDARY: $(ORCH_PROTO_C) $(ORCH_PROTO_H)
-include $(ORCH_OBJ:.o=.d)

# `make install [DESTDIR=...] [PREFIX=/usr]`: the command, the systemd units
# and generator (doc/doc.mk adds the man pages, completion, initramfs hook).
PREFIX     ?= /usr
SBINDIR    := $(PREFIX)/sbin
UNITDIR    := $(PREFIX)/lib/systemd/system
GENDIR     := $(PREFIX)/lib/systemd/system-generators
MANDIR     := $(PREFIX)/share/man
SYSCONFDIR ?= /etc
.PHONY: install
install: $(KUPDATE) $(ANCHOR)
	install -D -m 0755 $(KUPDATE) $(DESTDIR)$(SBINDIR)/kupdate
	install -D -m 0755 $(ANCHOR) $(DESTDIR)$(PREFIX)/lib/kupdate/kupdate-anchor
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(GENDIR)
	for u in units/*.service units/*.target; do \
		sed 's|@SBINDIR@|$(SBINDIR)|g' $$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u); \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	ln -sfn $(SBINDIR)/kupdate $(DESTDIR)$(GENDIR)/kupdate-generator
	install -d $(DESTDIR)$(SYSCONFDIR)/kernel/postinst.d
	sed 's|@SBINDIR@|$(SBINDIR)|g' units/kernel/zz-kupdate \
		> $(DESTDIR)$(SYSCONFDIR)/kernel/postinst.d/zz-kupdate
	chmod 0755 $(DESTDIR)$(SYSCONFDIR)/kernel/postinst.d/zz-kupdate
