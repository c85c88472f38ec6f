/* kupdate checkpoint/restore engine: public API.
 *
 * The engine knows process trees and image directories; it knows nothing
 * of systemd, kexec or update cycles (the orchestrator does). */
#ifndef CR_H
#define CR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CR_TOOL_VERSION "0.1.0"

struct cr_dump_opts {
	pid_t root;	      /* root of the tree to dump */
	const char *imgdir;   /* empty or new directory for the images */
	bool leave_running;   /* resume the tree after the dump instead of killing it */
	const char *cycle_id; /* recorded in the inventory (orchestrator) */
	bool no_page_crc;     /* skip the crc32c of page data */
	bool no_net_lock;     /* the caller locks the network itself */
	uint64_t ghost_limit; /* largest unlinked open file saved with its data; 0: 1 MiB */
};

struct cr_dump_stats {
	uint64_t pages;	    /* pages written */
	uint64_t frozen_ns; /* from seizing the tree to its release */
	uint64_t total_ns;
	unsigned processes, threads;
};

/* Checkpoint the tree.  On failure the tree is left running as it was. */
int cr_dump(const struct cr_dump_opts *o, struct cr_dump_stats *st);

struct cr_restore_opts {
	const char *imgdir;
	bool detach;	     /* return once the tree runs; the caller is its parent */
	const char *pidfile; /* receives the root pid */
	bool no_page_verify; /* skip the crc32c check of page data */
	bool no_net_unlock;  /* the caller lifts the network lock itself */
};

/* Recreate the tree.  With detach, returns 0 once it runs; otherwise
 * waits for the root and stores its wait status in *root_status. */
int cr_restore(const struct cr_restore_opts *o, pid_t *root, int *root_status);

/* Decode every image of a directory, as text or JSON. */
int cr_show(const char *imgdir, bool json, FILE *out);

#endif
