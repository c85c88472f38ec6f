/* The vDSO across kernels.
 *
 * A process keeps pointers into its vDSO (glibc looks the functions up once
 * at start-up), so the old vDSO's addresses must keep working after a
 * restore.  On the kernel the images were dumped on, the current [vdso] and
 * [vvar] mappings simply move to where the process had them.  On another
 * kernel (the point of kupdate) their code and data layout differ, so:
 *
 *   - the current [vvar]/[vdso] pair moves as a whole to a hole of the saved
 *     layout (just below the restorer, in the margin kept free around it);
 *   - at the old [vdso] address an anonymous read-only executable copy of
 *     the OLD image is mapped (its ELF headers stay valid for unwinders and
 *     for glibc's AT_SYSINFO_EHDR), in which every exported function starts
 *     with a jump to the same function of the NEW vDSO ("movabs $f, %r11;
 *     jmp *%r11": r11 is a scratch register at a call), or, if the new vDSO
 *     lacks it, with the equivalent system call.
 *
 * The old [vvar] is not mapped again: no old code that reads it is reached.
 * KUPDATE_VDSO_PROXY=1 forces the proxy on the same kernel (for tests). */
#include <elf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "log.h"
#include "proc.h"
#include "restore.h"
#include "util.h"
#include "vdso.h"

int vdso_parse(const uint8_t *img, size_t len, struct vdso_sym **out, size_t *nr)
{
	const Elf64_Ehdr *eh = (const void *)img;
	const Elf64_Shdr *sh;
	const Elf64_Phdr *ph;
	uint64_t base = 0;
	struct vdso_sym *syms = NULL;
	size_t n = 0;

	*out = NULL;
	*nr = 0;
	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shoff >= len ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shnum > (len - eh->e_shoff) / sizeof(Elf64_Shdr) || eh->e_phoff >= len ||
	    eh->e_phnum > (len - eh->e_phoff) / sizeof(Elf64_Phdr))
		return -EINVAL;
	ph = (const void *)(img + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD) {
			base = ph[i].p_vaddr - ph[i].p_offset;
			break;
		}
	sh = (const void *)(img + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *s = &sh[i], *strs;

		if (s->sh_type != SHT_DYNSYM || s->sh_link >= eh->e_shnum)
			continue;
		strs = &sh[s->sh_link];
		if (s->sh_offset > len || s->sh_size > len - s->sh_offset ||
		    strs->sh_offset > len || strs->sh_size > len - strs->sh_offset)
			break;
		for (size_t k = 0; k < s->sh_size / sizeof(Elf64_Sym); k++) {
			Elf64_Sym sym;
			const char *name;
			struct vdso_sym *ns;

			memcpy(&sym, img + s->sh_offset + k * sizeof(sym), sizeof(sym));
			if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_shndx ||
			    sym.st_name >= strs->sh_size || sym.st_value - base >= len)
				continue;
			name = (const char *)img + strs->sh_offset + sym.st_name;
			if (!memchr(name, 0, strs->sh_size - sym.st_name) ||
			    strlen(name) >= sizeof(syms[0].name))
				continue;
			ns = xrealloc_array(syms, n + 1, sizeof(*ns));
			if (!ns) {
				free(syms);
				return -ENOMEM;
			}
			syms = ns;
			snprintf(syms[n].name, sizeof(syms[n].name), "%s", name);
			syms[n].offset = sym.st_value - base;
			n++;
		}
		break;
	}
	*out = syms;
	*nr = n;
	return 0;
}

struct special {
	char name[24];
	uint64_t start, end;
};

static int own_specials(struct special *sp, int *nr)
{
	struct smaps_vma *v;
	int n, ret = parse_smaps(0, &v, &n);

	if (ret)
		return ret;
	*nr = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(v[i].path, "[vdso]") && strncmp(v[i].path, "[vvar", 5))
			continue;
		if (*nr == RST_MAX_MOVES)
			break;
		snprintf(sp[*nr].name, sizeof(sp[*nr].name), "%s", v[i].path);
		sp[*nr].start = v[i].start;
		sp[*nr].end = v[i].end;
		(*nr)++;
	}
	free_smaps(v, n);
	return 0;
}

int vdso_plan(pid_t pid, const struct rmm *mm, struct rst_builder *b, struct vdso_plan *vp)
{
	struct special cur[RST_MAX_MOVES];
	const VmaEntry *saved[RST_MAX_MOVES];
	int ncur = 0, nsaved = 0, ret;
	bool same;

	memset(vp, 0, sizeof(*vp));
	ret = own_specials(cur, &ncur);
	if (ret)
		return ret;
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];

		if (e->kind != VMA_KIND__VMA_VDSO && e->kind != VMA_KIND__VMA_VVAR)
			continue;
		if (nsaved == RST_MAX_MOVES) {
			pr_err("pid %d: too many kernel special mappings in the images", pid);
			return -EINVAL;
		}
		if (e->kind == VMA_KIND__VMA_VDSO)
			vp->old_vdso = e;
		saved[nsaved++] = e;
	}
	b->args.nr_moves = 0;
	if (!nsaved)
		return 0; /* the sweep unmaps ours */

	same = nsaved == ncur && !getenv("KUPDATE_VDSO_PROXY");
	for (int i = 0; same && i < ncur; i++) {
		const VmaEntry *e = saved[i];

		same = (!e->special || !strcmp(e->special, cur[i].name)) &&
		       e->end - e->start == cur[i].end - cur[i].start &&
		       e->start - saved[0]->start == cur[i].start - cur[0].start;
		if (same && e->kind == VMA_KIND__VMA_VDSO)
			same = mm->core->has_vdso_image &&
			       mm->core->vdso_image.len == cur[i].end - cur[i].start &&
			       !memcmp(mm->core->vdso_image.data, (void *)cur[i].start,
				       mm->core->vdso_image.len);
	}
	for (int i = 0; i < ncur; i++) {
		b->args.moves[i].from = cur[i].start;
		b->args.moves[i].to = same ? saved[i]->start : cur[i].start - cur[0].start;
		b->args.moves[i].len = cur[i].end - cur[i].start;
		vp->park_len += b->args.moves[i].len;
		if (!strcmp(cur[i].name, "[vdso]")) {
			vp->cur_vdso_start = cur[i].start;
			vp->cur_vdso_len = cur[i].end - cur[i].start;
			vp->cur_vdso_off = cur[i].start - cur[0].start;
		}
	}
	b->args.nr_moves = ncur;
	vp->span = cur[ncur - 1].end - cur[0].start;
	if (same)
		return 0;

	if (!vp->old_vdso || !mm->core->has_vdso_image ||
	    mm->core->vdso_image.len != vp->old_vdso->end - vp->old_vdso->start) {
		pr_err("pid %d: the images lack the old vDSO's contents; it cannot be restored on "
		       "another kernel",
		       pid);
		return -EOPNOTSUPP;
	}
	if (!vp->cur_vdso_len) {
		pr_err("pid %d: this kernel gives kupdate no vDSO to redirect the old one to", pid);
		return -EOPNOTSUPP;
	}
	vp->proxy = true;
	pr_info("pid %d: the vDSO differs from the dumping kernel's: redirecting its entry points",
		pid);
	return 0;
}

/* x86-64 syscall numbers of the vDSO's functions, for a new vDSO without
 * one of them */
static long syscall_of(const char *name)
{
	static const struct {
		const char *name;
		long nr;
	} map[] = {
		{ "clock_gettime", SYS_clock_gettime },
		{ "gettimeofday", SYS_gettimeofday },
		{ "time", SYS_time },
		{ "getcpu", SYS_getcpu },
		{ "clock_getres", SYS_clock_getres },
	};
	const char *n = !strncmp(name, "__vdso_", 7) ? name + 7 : name;

	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (!strcmp(n, map[i].name))
			return map[i].nr;
	return -1;
}

void vdso_place(struct vdso_plan *vp, struct rst_builder *b, uint64_t blob_start)
{
	struct rst_vma *v;

	if (!vp->proxy)
		return;
	/* the current pair, just below the restorer */
	vp->base = (blob_start - (1UL << 20) - vp->span) & ~(PAGE_SIZE - 1);
	for (uint32_t i = 0; i < b->args.nr_moves; i++)
		b->args.moves[i].to += vp->base;
	vp->vma_index = b->nr_vmas;
	v = &b->vmas[b->nr_vmas++];
	memset(v, 0, sizeof(*v));
	v->start = vp->old_vdso->start;
	v->end = vp->old_vdso->end;
	v->prot = PROT_READ | PROT_EXEC;
	v->mmap_flags = MAP_PRIVATE;
	v->fd = -1;
}

int vdso_fill(pid_t pid, const struct rmm *mm, const struct vdso_plan *vp, struct rst_vma *vmas,
	      uint8_t *args, size_t *off)
{
	struct vdso_sym *cur = NULL, *old = NULL;
	size_t ncur = 0, nold = 0;
	uint64_t new_vdso = vp->base + vp->cur_vdso_off;
	uint8_t *img;
	int ret;

	if (!vp->proxy)
		return 0;
	ret = vdso_parse((const uint8_t *)vp->cur_vdso_start, vp->cur_vdso_len, &cur, &ncur);
	if (!ret)
		ret = vdso_parse(mm->core->vdso_image.data, mm->core->vdso_image.len, &old, &nold);
	if (ret) {
		pr_err("pid %d: cannot read the symbols of a vDSO", pid);
		free(cur);
		free(old);
		return ret;
	}
	/* the patched copy of the old image, in the restorer's arguments */
	img = args + *off;
	memcpy(img, mm->core->vdso_image.data, mm->core->vdso_image.len);
	for (size_t i = 0; i < nold; i++) {
		uint8_t *p = img + old[i].offset;
		long nr = syscall_of(old[i].name);
		bool done = false;

		if (old[i].offset + 13 > mm->core->vdso_image.len)
			continue;
		for (size_t k = 0; k < ncur && !done; k++) {
			uint64_t target = new_vdso + cur[k].offset;

			if (strcmp(cur[k].name, old[i].name))
				continue;
			p[0] = 0x49; /* movabs $target, %r11 */
			p[1] = 0xbb;
			memcpy(p + 2, &target, 8);
			p[10] = 0x41; /* jmp *%r11 */
			p[11] = 0xff;
			p[12] = 0xe3;
			done = true;
			pr_debug("pid %d: vDSO %s at +%#lx -> %#lx", pid, old[i].name,
				 (unsigned long)old[i].offset, (unsigned long)target);
		}
		if (!done && nr >= 0) {
			int32_t n32 = nr;

			p[0] = 0xb8; /* mov $nr, %eax */
			memcpy(p + 1, &n32, 4);
			p[5] = 0x0f; /* syscall */
			p[6] = 0x05;
			p[7] = 0xc3; /* ret */
			done = true;
		}
		if (!done)
			pr_warn("pid %d: vDSO function %s has no counterpart on this kernel", pid,
				old[i].name);
	}
	free(cur);
	free(old);
	vmas[vp->vma_index].src_off = *off;
	vmas[vp->vma_index].src_len = mm->core->vdso_image.len;
	*off += PAGE_ALIGN(mm->core->vdso_image.len);
	return 0;
}

size_t vdso_args_len(const struct rmm *mm)
{
	/* the image, page aligned after whatever precedes it */
	return mm->core->has_vdso_image ? PAGE_ALIGN(mm->core->vdso_image.len) + PAGE_SIZE : 0;
}
