/* The PAGEMAP_SCAN ioctl on /proc/PID/pagemap (Linux 6.7), for headers that
 * predate it: the engine finds present, zero and written pages with it and
 * falls back to reading pagemap where the kernel lacks it. */
#ifndef CR_PAGESCAN_H
#define CR_PAGESCAN_H

#include <linux/fs.h>
#include <stdint.h>
#include <sys/ioctl.h>

#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start, end, categories;
};
struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN	      _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING   (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
#define PAGE_IS_WPALLOWED     (1 << 0)
#define PAGE_IS_WRITTEN	      (1 << 1)
#define PAGE_IS_FILE	      (1 << 2)
#define PAGE_IS_PRESENT	      (1 << 3)
#define PAGE_IS_SWAPPED	      (1 << 4)
#define PAGE_IS_PFNZERO	      (1 << 5)
#endif

#endif
