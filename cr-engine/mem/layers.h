#ifndef CR_LAYERS_H
#define CR_LAYERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/pagemap.pb-c.h"

struct rmm;
struct rst_builder;
/* the layers below a process's own images, loaded as they are needed */
struct layer;

/* Where the data of a process's pages is: its own layer's page files, and
 * the layers below (in_parent runs) */
struct run_src {
	int dirfd;
	pid_t pid;
	const struct rmm *mm;
	const uint64_t *off; /* each run's data offset in its page file */
	const int *pages_fd;
	struct layer *layers;
	size_t cap; /* of b->runs */
};

/* layers.c: none loaded yet (NULL if out of memory) */
struct layer *mem_layers_new(void);
/* for __attribute__((cleanup)) */
void mem_layers_free(struct layer **lp);
/* close the page files of the layers and those of the process's own
 * layer, fds (head: its pagemap) */
void mem_layers_close_pages(struct layer *l, const PagemapHead *head, const int *fds);
/* The runs of s->mm from *run on that start before end, added to b with
 * where their data is; the parent's pages (cow_parent) are left out: the
 * process inherits them. */
int mem_plan_runs(struct run_src *s, size_t *run, uint64_t end, struct rst_builder *b);

#endif
