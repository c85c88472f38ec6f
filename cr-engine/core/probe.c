/* The probes of cr-check.h: the kernel interfaces the dump relies on,
 * each tried on something of the caller's own, for `kupdate check`. */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/ioctl.h>

#include "cr-check.h"
#include "log.h"
#include "netlock.h"
#include "pagescan.h"
#include "sockdiag.h"
#include "util.h"

int cr_check_sock_diag(const ino_t *ino, size_t n, bool *seen)
{
	struct sk_table t;
	int ret = sockdiag_collect(&t);

	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++)
		seen[i] = sockdiag_find(&t, (uint32_t)ino[i]) != NULL;
	sockdiag_free(&t);
	return 0;
}

int cr_check_net_lock(char *why, size_t len)
{
	return netlock_probe(why, len);
}

int cr_check_pagemap_scan(void)
{
	_cleanup_close_ int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	volatile char page[4096] __attribute__((aligned(4096)));
	struct page_region r[4];
	struct pm_scan_arg a = { 0 };
	long n;

	page[0] = 1;
	if (fd < 0)
		return -errno;
	a.size = sizeof(a);
	a.start = (uintptr_t)page;
	a.end = a.start + 4096;
	a.vec = (uintptr_t)r;
	a.vec_len = 4;
	a.category_anyof_mask = PAGE_IS_PRESENT;
	a.return_mask = PAGE_IS_PRESENT;
	n = ioctl(fd, PAGEMAP_SCAN, &a);
	if (n < 0)
		return -errno;
	return n == 1;
}
