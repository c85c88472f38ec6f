# bench: `make bench` checkpoints and restores the workloads of
# bench/work.c with kupdate (and CRIU, given CRIU=/path/to/criu) and prints
# per case the medians of dump, frozen and restore times, image size, the
# tool's peak RSS and the kupdate/CRIU ratios; for mem256 and mem1g also
# the floor of a dump here (the pages moved into the store without a
# copy out, their crc32c, the process's death).  Not part of `make check`.
#
#   make bench [CRIU=PATH] [BENCH_RUNS=3] [BENCH_CASES=mem256,wss1g,...]
#              [BENCH_STORE=/dev/shm] [BENCH_WARM=1]
# BENCH_WARM=1 (the default) touches the memory each dump and restore will
# take just before it (kbench --warm): this VM's host takes freed memory
# back, which made the figures swing with the seconds before each run.
# Cases: mem256 mem1g mem4g wss1g tree100 fds10k tcp1k.  Needs root.

BENCH_BIN   := $(BUILD)/bench
BENCH_RUNS  ?= 3
BENCH_CASES ?=
BENCH_STORE ?= /dev/shm
BENCH_WARM  ?= 1
CRIU        ?=
BENCH_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE

$(BENCH_BIN)/kbench: bench/kbench.c cr-engine/base/crc32c.c cr-engine/base/crc32c.h cr-engine/base/crc32c-impl.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(BENCH_CFLAGS) -Icr-engine/base -pthread -o $@ bench/kbench.c cr-engine/base/crc32c.c

$(BENCH_BIN)/kbench-work: bench/work.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(BENCH_CFLAGS) -o $@ $<

all: $(BENCH_BIN)/kbench $(BENCH_BIN)/kbench-work

bench: $(KUPDATE) $(BENCH_BIN)/kbench $(BENCH_BIN)/kbench-work
	$(Q)$(BENCH_BIN)/kbench --kupdate $(KUPDATE) --work $(BENCH_BIN)/kbench-work \
		--runs $(BENCH_RUNS) --store $(BENCH_STORE) $(if $(filter 1,$(BENCH_WARM)),--warm) \
		$(if $(CRIU),--criu $(CRIU)) $(if $(BENCH_CASES),--cases $(BENCH_CASES))
