# tests/fuzz: libFuzzer targets over the image reader (fuzz-images: every
# image a restore loads and validates, and `kupdate show`'s decoder) and the
# cycle manifest parser (fuzz-manifest).  Built with clang (tools/deps.sh
# fuzz), ASan and UBSan, from their own copy of the engine's objects.
#
#   make fuzz [FUZZ_TIME=60]   seed corpus from real dumps (once), then each
#                              target runs FUZZ_TIME seconds; crashes go to
#                              $(BUILD)/fuzz/crashes/
#   make check-fuzz-smoke      the regression inputs (tests/fuzz/regress/),
#                              then 10 s of each target (a make check suite)

FUZZ_BUILD   := $(BUILD)/fuzz
FUZZ_TIME    ?= 60
FUZZ_SMOKE_TIME ?= 10
FUZZ_LIBCR   := $(FUZZ_BUILD)/lib/libcr.a
FUZZ_ORCH    := $(patsubst $(OBJ)/%,$(FUZZ_BUILD)/obj/%,$(filter-out %/kupdate.o %/engine_cmds.o,$(ORCH_OBJ)) $(ORCH_PROTO_OBJ))
FUZZ_SAN     := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS   = $(CSTD) -O1 -g $(WARN) -D_GNU_SOURCE $(PKG_CFLAGS) $(ENGINE_INC) -Iorchestrator \
		-I$(FUZZ_BUILD)/gen/orch-images -I$(FUZZ_BUILD)/gen -Itests/fuzz
FUZZ_BINS    := $(FUZZ_BUILD)/bin/fuzz-images $(FUZZ_BUILD)/bin/fuzz-manifest
FUZZ_SEEDS   := $(FUZZ_BUILD)/seeds

.PHONY: fuzz fuzz-build fuzz-lib fuzz-corpus check-fuzz-smoke
fuzz-lib:
	$(Q)tools/deps.sh fuzz
	$(Q)$(MAKE) -s --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang SAN=1 \
		OPT="-O1 -g -fsanitize=fuzzer-no-link" $(FUZZ_LIBCR) $(FUZZ_ORCH)

$(FUZZ_BUILD)/bin/fuzz-images: tests/fuzz/fuzz_images.c tests/fuzz/fuzz_common.h fuzz-lib
	@mkdir -p $(dir $@)
	$(Q)clang $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ $< $(FUZZ_LIBCR) $(PKG_LIBS)

$(FUZZ_BUILD)/bin/fuzz-manifest: tests/fuzz/fuzz_manifest.c tests/fuzz/fuzz_common.h fuzz-lib
	@mkdir -p $(dir $@)
	$(Q)clang $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ $< $(FUZZ_ORCH) $(FUZZ_LIBCR) $(PKG_LIBS)

# plain tool: no fuzzer runtime
$(FUZZ_BUILD)/bin/mkseed: tests/fuzz/mkseed.c tests/fuzz/fuzz_common.h $(ENGINE_DIR)/base/crc32c.c fuzz-lib
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(FUZZ_CFLAGS) -o $@ $< $(ENGINE_DIR)/base/crc32c.c \
		$(FUZZ_BUILD)/gen/orch-images/cycle.pb-c.c $(PKG_LIBS)

fuzz-build: $(FUZZ_BINS) $(FUZZ_BUILD)/bin/mkseed

# seeds from real dumps, made once (rm -rf $(FUZZ_SEEDS) to remake them)
fuzz-corpus: fuzz-build $(KUPDATE) $(CR_BINS)
	$(Q)[ -d $(FUZZ_SEEDS)/images ] || { rm -rf $(FUZZ_SEEDS).tmp && \
		tests/fuzz/mkcorpus.sh $(KUPDATE) $(TBIN)/cr $(FUZZ_BUILD)/bin/mkseed $(FUZZ_SEEDS).tmp && \
		mv $(FUZZ_SEEDS).tmp $(FUZZ_SEEDS); }

fuzz: fuzz-corpus
	$(Q)tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TIME)

CHECK_SUITES += fuzz-smoke
check-fuzz-smoke: fuzz-corpus
	$(Q)tools/run-suite $(BUILD)/results fuzz-smoke tests/fuzz/run.sh --tap $(FUZZ_BUILD) $(FUZZ_SMOKE_TIME)
