/* Registers survive: xmm0-15 (and the upper halves of ymm0-15 with AVX,
 * zmm0-31 and k0-7 with AVX-512) hold known values through the dump and
 * restore while the task spins in a loop that never touches them; general
 * purpose registers r8-r15 likewise; the SSE control register (rounding
 * mode), the x87 control word, the fs base (TLS) and the gs base too. */
#include <asm/prctl.h>
#include <cpuid.h>
#include <fenv.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "crt.h"

static uint8_t in[32][64] __attribute__((aligned(64)));
static uint8_t out[32][64] __attribute__((aligned(64)));
static uint64_t kin[8], kout[8], gin[8], gout[8];
static __thread uint64_t tls_value = 0x1122334455667788ULL;

static int cpu_has(int leaf, int sub, int reg, int bit)
{
	unsigned r[4];

	if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]))
		return 0;
	return (r[reg] >> bit) & 1;
}

static uint64_t xcr0(void)
{
	uint32_t a, d;

	__asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(0));
	return ((uint64_t)d << 32) | a;
}

#define SPIN "1: pause\n cmpl $0, %[term]\n je 1b\n"

/* xmm0-15 and r8-r15 */
static void run_sse(void)
{
	__asm__ volatile(
		"movdqu 0*64(%[i]), %%xmm0\n movdqu 1*64(%[i]), %%xmm1\n"
		"movdqu 2*64(%[i]), %%xmm2\n movdqu 3*64(%[i]), %%xmm3\n"
		"movdqu 4*64(%[i]), %%xmm4\n movdqu 5*64(%[i]), %%xmm5\n"
		"movdqu 6*64(%[i]), %%xmm6\n movdqu 7*64(%[i]), %%xmm7\n"
		"movdqu 8*64(%[i]), %%xmm8\n movdqu 9*64(%[i]), %%xmm9\n"
		"movdqu 10*64(%[i]), %%xmm10\n movdqu 11*64(%[i]), %%xmm11\n"
		"movdqu 12*64(%[i]), %%xmm12\n movdqu 13*64(%[i]), %%xmm13\n"
		"movdqu 14*64(%[i]), %%xmm14\n movdqu 15*64(%[i]), %%xmm15\n"
		"mov 0(%[g]), %%r8\n mov 8(%[g]), %%r9\n mov 16(%[g]), %%r10\n"
		"mov 24(%[g]), %%r11\n mov 32(%[g]), %%r12\n mov 40(%[g]), %%r13\n"
		"mov 48(%[g]), %%r14\n mov 56(%[g]), %%r15\n" SPIN
		"movdqu %%xmm0, 0*64(%[o])\n movdqu %%xmm1, 1*64(%[o])\n"
		"movdqu %%xmm2, 2*64(%[o])\n movdqu %%xmm3, 3*64(%[o])\n"
		"movdqu %%xmm4, 4*64(%[o])\n movdqu %%xmm5, 5*64(%[o])\n"
		"movdqu %%xmm6, 6*64(%[o])\n movdqu %%xmm7, 7*64(%[o])\n"
		"movdqu %%xmm8, 8*64(%[o])\n movdqu %%xmm9, 9*64(%[o])\n"
		"movdqu %%xmm10, 10*64(%[o])\n movdqu %%xmm11, 11*64(%[o])\n"
		"movdqu %%xmm12, 12*64(%[o])\n movdqu %%xmm13, 13*64(%[o])\n"
		"movdqu %%xmm14, 14*64(%[o])\n movdqu %%xmm15, 15*64(%[o])\n"
		"mov %%r8, 0(%[go])\n mov %%r9, 8(%[go])\n mov %%r10, 16(%[go])\n"
		"mov %%r11, 24(%[go])\n mov %%r12, 32(%[go])\n mov %%r13, 40(%[go])\n"
		"mov %%r14, 48(%[go])\n mov %%r15, 56(%[go])\n"
		:
		: [i] "r"(in), [o] "r"(out), [g] "r"(gin), [go] "r"(gout), [term] "m"(crt_term)
		: "memory", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "xmm0", "xmm1",
		  "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
		  "xmm12", "xmm13", "xmm14", "xmm15");
}

__attribute__((target("avx"))) static void run_avx(void)
{
	__asm__ volatile("vmovdqu 0*64(%[i]), %%ymm0\n vmovdqu 1*64(%[i]), %%ymm1\n"
			 "vmovdqu 2*64(%[i]), %%ymm2\n vmovdqu 3*64(%[i]), %%ymm3\n"
			 "vmovdqu 4*64(%[i]), %%ymm4\n vmovdqu 5*64(%[i]), %%ymm5\n"
			 "vmovdqu 6*64(%[i]), %%ymm6\n vmovdqu 7*64(%[i]), %%ymm7\n"
			 "vmovdqu 8*64(%[i]), %%ymm8\n vmovdqu 9*64(%[i]), %%ymm9\n"
			 "vmovdqu 10*64(%[i]), %%ymm10\n vmovdqu 11*64(%[i]), %%ymm11\n"
			 "vmovdqu 12*64(%[i]), %%ymm12\n vmovdqu 13*64(%[i]), %%ymm13\n"
			 "vmovdqu 14*64(%[i]), %%ymm14\n vmovdqu 15*64(%[i]), %%ymm15\n" SPIN
			 "vmovdqu %%ymm0, 0*64(%[o])\n vmovdqu %%ymm1, 1*64(%[o])\n"
			 "vmovdqu %%ymm2, 2*64(%[o])\n vmovdqu %%ymm3, 3*64(%[o])\n"
			 "vmovdqu %%ymm4, 4*64(%[o])\n vmovdqu %%ymm5, 5*64(%[o])\n"
			 "vmovdqu %%ymm6, 6*64(%[o])\n vmovdqu %%ymm7, 7*64(%[o])\n"
			 "vmovdqu %%ymm8, 8*64(%[o])\n vmovdqu %%ymm9, 9*64(%[o])\n"
			 "vmovdqu %%ymm10, 10*64(%[o])\n vmovdqu %%ymm11, 11*64(%[o])\n"
			 "vmovdqu %%ymm12, 12*64(%[o])\n vmovdqu %%ymm13, 13*64(%[o])\n"
			 "vmovdqu %%ymm14, 14*64(%[o])\n vmovdqu %%ymm15, 15*64(%[o])\n"
			 :
			 : [i] "r"(in), [o] "r"(out), [term] "m"(crt_term)
			 : "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

#define Z(n)  "vmovdqu64 " #n "*64(%[i]), %%zmm" #n "\n"
#define ZO(n) "vmovdqu64 %%zmm" #n ", " #n "*64(%[o])\n"
__attribute__((target("avx512f"))) static void run_avx512(void)
{
	__asm__ volatile(
		Z(0) Z(1) Z(2) Z(3) Z(4) Z(5) Z(6) Z(7) Z(8) Z(9) Z(10) Z(11) Z(12) Z(13) Z(14) Z(
			15) Z(16) Z(17) Z(18) Z(19) Z(20) Z(21) Z(22) Z(23) Z(24) Z(25) Z(26) Z(27)
			Z(28) Z(29) Z(30)
				Z(31) "kmovw 0(%[k]), %%k1\n kmovw 8(%[k]), %%k2\n kmovw 16(%[k]), "
				      "%%k3\n"
				      "kmovw 24(%[k]), %%k4\n kmovw 32(%[k]), %%k5\n kmovw "
				      "40(%[k]), %%k6\n"
				      "kmovw 48(%[k]), %%k7\n" SPIN ZO(0) ZO(1) ZO(2) ZO(3) ZO(4)
					      ZO(5) ZO(6) ZO(7) ZO(8) ZO(9) ZO(10) ZO(11) ZO(12) ZO(
						      13) ZO(14) ZO(15) ZO(16) ZO(17) ZO(18) ZO(19)
						      ZO(20) ZO(21) ZO(22) ZO(23) ZO(24) ZO(25)
							      ZO(26) ZO(27) ZO(28) ZO(29) ZO(30) ZO(
								      31) "kmovw %%k1, 0(%[ko])\n "
									  "kmovw %%k2, 8(%[ko])\n "
									  "kmovw %%k3, 16(%[ko])\n"
									  "kmovw %%k4, 24(%[ko])\n "
									  "kmovw %%k5, 32(%[ko])\n "
									  "kmovw %%k6, 40(%[ko])\n"
									  "kmovw %%k7, 48(%[ko])\n"
		:
		: [i] "r"(in), [o] "r"(out), [k] "r"(kin), [ko] "r"(kout), [term] "m"(crt_term)
		: "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
		  "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17",
		  "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26",
		  "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6",
		  "k7");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "auto";
	int width = 16, nregs = 16;
	uint64_t gs_in = 0x7fff12345000ULL, gs_now = 0;
	unsigned short fcw_in = 0x037f & ~0x0c00, fcw_out = 0;
	int rounding;

	crt_init();
	for (int r = 0; r < 32; r++)
		for (int b = 0; b < 64; b++)
			in[r][b] = (uint8_t)(r * 61 + b * 7 + 3);
	for (int k = 0; k < 8; k++) {
		kin[k] = 0x1111 * (k + 1);
		gin[k] = 0x0123456789abcdefULL ^ ((uint64_t)k << 56) ^ k;
	}
	fesetround(FE_UPWARD);
	fcw_in |= 0x0800; /* x87 rounding: up */
	__asm__ volatile("fldcw %0" ::"m"(fcw_in));
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gs_in))
		crt_fail("ARCH_SET_GS failed");

	if (!strcmp(mode, "auto")) {
		int osxsave = cpu_has(1, 0, 2, 27);

		if (osxsave && cpu_has(7, 0, 1, 16) && (xcr0() & 0xe6) == 0xe6)
			mode = "avx512";
		else if (osxsave && cpu_has(1, 0, 2, 28) && (xcr0() & 6) == 6)
			mode = "avx";
		else
			mode = "sse";
	}
	crt_msg("checking %s registers", mode);
	crt_ready();
	if (!strcmp(mode, "avx512")) {
		width = 64;
		nregs = 32;
		run_avx512();
	} else if (!strcmp(mode, "avx")) {
		width = 32;
		run_avx();
	} else {
		run_sse();
	}
	__asm__ volatile("fnstcw %0" : "=m"(fcw_out));
	rounding = fegetround();
	syscall(SYS_arch_prctl, ARCH_GET_GS, &gs_now);

	for (int r = 0; r < nregs; r++)
		crt_check(!memcmp(in[r], out[r], width), "%s register %d changed", mode, r);
	if (!strcmp(mode, "avx512"))
		for (int k = 1; k < 8; k++)
			crt_check((kout[k - 1] & 0xffff) == (kin[k - 1] & 0xffff), "k%d changed",
				  k);
	if (!strcmp(mode, "sse"))
		for (int k = 0; k < 8; k++)
			crt_check(gout[k] == gin[k], "r%d changed", k + 8);
	crt_check(rounding == FE_UPWARD, "SSE rounding mode changed (%#x)", rounding);
	crt_check((fcw_out & 0x0c00) == 0x0800, "x87 control word changed (%#x)", fcw_out);
	crt_check(gs_now == gs_in, "gs base changed (%#lx)", (unsigned long)gs_now);
	crt_check(tls_value == 0x1122334455667788ULL, "TLS variable changed");
	crt_pass();
}
