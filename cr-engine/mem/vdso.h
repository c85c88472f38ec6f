#ifndef CR_VDSO_H
#define CR_VDSO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/mm.pb-c.h"

struct rmm;
struct rst_builder;
struct rst_vma;

struct vdso_sym {
	char name[48];
	uint64_t offset; /* from the start of the image */
};

/* the exported functions of a vDSO image */
int vdso_parse(const uint8_t *img, size_t len, struct vdso_sym **out, size_t *nr);

struct vdso_plan {
	bool proxy; /* redirect the old vDSO to this kernel's */
	const VmaEntry *old_vdso;
	uint64_t park_len; /* room the current specials need in the restorer */
	uint64_t span;	   /* from the first current special to the last's end */
	uint64_t cur_vdso_start, cur_vdso_len, cur_vdso_off;
	uint64_t base;	  /* where the current specials go in proxy mode */
	size_t vma_index; /* the proxy's mapping in the builder */
};

/* Decide how the current [vvar]/[vdso] reach the restored process; fills
 * the builder's moves. */
int vdso_plan(pid_t pid, const struct rmm *mm, struct rst_builder *b, struct vdso_plan *vp);
/* Proxy: once the restorer's place is known, place the current pair below
 * it and add the mapping of the old image (the builder has room for one). */
void vdso_place(struct vdso_plan *vp, struct rst_builder *b, uint64_t blob_start);
/* Proxy: write the patched old image at args + *off. */
int vdso_fill(pid_t pid, const struct rmm *mm, const struct vdso_plan *vp, struct rst_vma *vmas,
	      uint8_t *args, size_t *off);
/* the room vdso_fill needs */
size_t vdso_args_len(const struct rmm *mm);

#endif
