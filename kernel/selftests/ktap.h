/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal kselftest-style TAP output for kupdate's kernel selftests.
 *
 *   ktap_plan(n);                       "TAP version 13" + "1..n"
 *   ktap_ok(cond, "what %d", x);        "ok N what" / "not ok N what"
 *   ktap_skip("why");                   "ok N # SKIP why"
 *   ktap_info("...");                   "# ..."
 *   return ktap_finish();               exit status 1 if anything failed
 *                                       or the plan was not met
 *
 * Output is unbuffered line by line so a crash loses nothing already said.
 */
#ifndef KUPDATE_KTAP_H
#define KUPDATE_KTAP_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ktap_n, ktap_planned, ktap_failed;

static inline void ktap_plan(int n)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	ktap_planned = n;
	printf("TAP version 13\n1..%d\n", n);
}

static inline void ktap_vresult(const char *prefix, const char *fmt, va_list ap)
{
	printf("%s %d ", prefix, ++ktap_n);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

__attribute__((format(printf, 2, 3))) static inline int ktap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ktap_vresult(cond ? "ok" : "not ok", fmt, ap);
	va_end(ap);
	if (!cond)
		ktap_failed++;
	return cond;
}

__attribute__((format(printf, 1, 2))) static inline void ktap_skip(const char *fmt, ...)
{
	va_list ap;

	printf("ok %d # SKIP ", ++ktap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

__attribute__((format(printf, 1, 2))) static inline void ktap_info(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Abort the whole program: report every remaining planned test as failed. */
__attribute__((format(printf, 1, 2), noreturn)) static inline void ktap_bail(const char *fmt, ...)
{
	va_list ap;

	fputs("Bail out! ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (errno: %s)\n", strerror(errno));
	fflush(stdout);
	exit(2);
}

static inline int ktap_finish(void)
{
	if (ktap_n != ktap_planned) {
		printf("# planned %d tests, ran %d\n", ktap_planned, ktap_n);
		return 1;
	}
	printf("# %d passed, %d failed\n", ktap_n - ktap_failed, ktap_failed);
	return ktap_failed ? 1 : 0;
}

#endif
