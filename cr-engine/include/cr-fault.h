/* Test-only fault injection, shared by the engine and the orchestrator.
 * Not a feature: nothing in --help mentions it, and the tests that use it
 * are tests/cycle/faults.sh (QEMU) and the C/R tests.  The environment variable
 *
 *   KUPDATE_FAULT=PHASE[:N][,PHASE[:N]...]
 *
 * makes kupdate fail at PHASE as if that step had failed (the boot side also
 * reads kupdate.fault= from the kernel command line, see boot.c).  N picks a
 * unit of a cycle: its position (1 = the first unit apply dumps, or the
 * first of the manifest) or its name; without N the phase fails for every
 * unit.  Phases:
 *
 *   apply:   preflight, freeze, netlock (locking a connection, engine),
 *            dump (after the unit's processes are seized), image-write
 *            (engine: every image file of the unit), manifest (the commit
 *            of the cycle), kexec-load (the final load), kexec-exec,
 *            kill-dump (engine: kupdate SIGKILLs itself once the first
 *            process of the unit that holds a connection is dumped (or its
 *            last process), its connections read and locked, before
 *            any image is written; `kupdate dump` too, with no N, as in the
 *            host test fault-kill-dump-tcp), interrupt-dump (the same,
 *            with SIGINT: the dump stops as after Ctrl-C; host test
 *            fault-interrupt-dump-tcp), room-check-off (skip the
 *            free-space check, so that a full image filesystem is met by
 *            the writes), slow-seize (engine: 1 s once the tree is
 *            seized, before any of it is read: its timers run on; host
 *            test timerfd-slowseize)
 *   boot:    generator, store-mount (kupdate-store.service: the early
 *            mount of apply --store's file system), restore (engine: after
 *            the tree is created), unlock (the network unlock after a
 *            unit's restore), ids-late (engine: the check that the saved
 *            ids are free is skipped, as if a task took one after it; host
 *            test refuse-pid-taken-late), slow-made-net (engine: 1.5 s
 *            once a container's veth pairs are made again, before its
 *            connections are: the peers' segments meet the lock; host
 *            test tcpstream-ctr-slow)
 *
 * The orchestrator puts the position of the unit it works on in
 * KUPDATE_FAULT_UNIT (and its name in KUPDATE_FAULT_UNIT_NAME) for the
 * engine's checks, or, in a thread that dumps units, gives them to
 * cr_fault_set_unit(), which overrides the environment in that thread. */
#ifndef CR_FAULT_PUBLIC_H
#define CR_FAULT_PUBLIC_H

#include <stdbool.h>

/* does the fault spec name PHASE for unit IDX (1-based, 0: none) / NAME? */
bool cr_fault_unit(const char *phase, int idx, const char *name);
/* the same for the unit in KUPDATE_FAULT_UNIT / KUPDATE_FAULT_UNIT_NAME */
bool cr_fault(const char *phase);
/* the unit this thread works on, for cr_fault() (IDX -1: none, the
 * environment's) */
void cr_fault_set_unit(int idx, const char *name);

#endif
