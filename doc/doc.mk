# doc/: the man pages, generated into the build from doc/*.in (version,
# date and install paths filled in), checked by tests/ops/man.sh.
MAN_SRC   := $(wildcard doc/*.[578].in)
MAN_PAGES := $(patsubst doc/%.in,$(BUILD)/man/%,$(MAN_SRC))
KUPDATE_VERSION := $(shell sed -n 's/^\#define CR_TOOL_VERSION "\(.*\)"/\1/p' cr-engine/include/cr.h)
# reproducible: the date of the last commit (or SOURCE_DATE_EPOCH, as
# dpkg-buildpackage sets it), not the build's
MAN_EPOCH := $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct -- doc 2>/dev/null),$(shell date +%s))
MAN_DATE  := $(shell LC_ALL=C date -u -d @$(MAN_EPOCH) '+%B %Y')

$(BUILD)/man/%: doc/%.in cr-engine/include/cr.h doc/doc.mk
	@mkdir -p $(dir $@)
	$(Q)sed -e 's|@VERSION@|$(KUPDATE_VERSION)|g' -e 's|@DATE@|$(MAN_DATE)|g' \
		-e 's|@UNITDIR@|$(UNITDIR)|g' -e 's|@GENDIR@|$(GENDIR)|g' \
		-e 's|@DATADIR@|$(PREFIX)/share|g' -e 's|@LIBDIR@|$(PREFIX)/lib|g' $< > $@

.PHONY: man install-doc
man: $(MAN_PAGES)
all: man

# with `make install`: the man pages, the bash completion, the image
# schemas (kupdate-images(5)) and the initramfs-tools hook
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
DATADIR       := $(PREFIX)/share
install: install-doc
install-doc: $(MAN_PAGES)
	for m in $(MAN_PAGES); do s=$${m##*.}; \
		install -D -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); done
	install -D -m 0644 doc/kupdate.bash-completion $(DESTDIR)$(COMPLETIONDIR)/kupdate
	install -d $(DESTDIR)$(DATADIR)/kupdate/proto
	install -m 0644 cr-engine/images/*.proto orchestrator/images/*.proto \
		$(DESTDIR)$(DATADIR)/kupdate/proto/
	install -D -m 0755 initramfs/initramfs-tools/init-top/kupdate \
		$(DESTDIR)$(DATADIR)/initramfs-tools/scripts/init-top/kupdate
