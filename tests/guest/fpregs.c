/* fpregs: the vector and FP registers survive syscalls into kbox, and a
 * signal handler sees and changes them in its frame, as on Linux.
 *
 *   fpregs N   N rounds of each case the CPU has, then a line per case:
 *     sse     xmm0-15 and MXCSR set, AVX and AVX-512 state initial
 *     avx     ymm0-15 set, AVX-512 state initial
 *     avx512  zmm0-31 and k0-7 set
 *     signal  kill(self) at a site: the handler finds xmm0-15, MXCSR
 *             (and zmm16 with AVX-512) in its frame and changes xmm1
 *             (and zmm16); the changes are the registers after it
 *     x87     two x87 stack values besides xmm0-15 (x87 in use)
 *   Each round calls uname and stat at sites of the shape the rewrite
 *   tier patches (`mov $nr,%eax; syscall`), so that kbox's code (LKL,
 *   memcpy) runs between; after the call every register must hold what
 *   it held before, and what was in its initial state must be zero.
 *   "site patched" reads the uname site's bytes (the rewrite tier's jump).
 * Prints "FAIL ..." and exits 1 at the first difference. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <ucontext.h>
#include <unistd.h>

/* The sites, apart from the code around them (no-ops before and after,
 * so that the rewrite tier's decodings around them are in step). */
__asm__(".text\n"
	".p2align 6\n"
	".fill 1088, 1, 0x90\n"
	".globl fp_site_uname\n"
	"fp_site_uname:\n"
	"	mov $63, %eax\n"
	"	syscall\n"
	"	ret\n"
	".p2align 4\n"
	".globl fp_site_stat\n"
	"fp_site_stat:\n"
	"	mov $4, %eax\n"
	"	syscall\n"
	"	ret\n"
	".p2align 4\n"
	".globl fp_site_kill\n"
	"fp_site_kill:\n"
	"	mov $62, %eax\n"
	"	syscall\n"
	"	ret\n"
	".fill 320, 1, 0x90\n");
long fp_site_uname(long, long), fp_site_stat(long, long), fp_site_kill(long, long);

/* Register images: register i at 64*i (16, 32 or 64 bytes of it), k0-7
 * at 2048, MXCSR at 2112, two x87 doubles at 2120 and the x87 control
 * word at 2136 (rounding toward zero); after the call, ymm0-15
 * whole at 4096 and zmm0-31 whole at 8192, k0-7 at 10240 (for the
 * initial-state checks). */
enum { IMG = 12288, K = 2048, MXCSR = 2112, ST = 2120, YMM = 4096, ZMM = 8192, KOUT = 10240 };

/* fp_run_KIND(in, out, a0, a1, site, level): loads in's registers of
 * that kind and MXCSR, calls site(a0, a1), stores them to out; level 1
 * also stores ymm0-15 whole, 2 zmm0-31 and k0-7 too. */
#define RUN_BEGIN(name)                                             \
	".p2align 4\n"                                              \
	".globl " name "\n"                                         \
	name ":\n"                                                  \
	"	push %rbx\n	push %r12\n	push %r13\n	push %r14\n	push %r15\n" \
	"	mov %rdi, %r12\n	mov %rsi, %r13\n	mov %r8, %r14\n"            \
	"	mov %r9d, %r15d\n	mov %rdx, %rdi\n	mov %rcx, %rsi\n"           \
	"	ldmxcsr 2112(%r12)\n"
#define RUN_END                                                       \
	"	stmxcsr 2112(%r13)\n"                                         \
	"	cmp $1, %r15d\n	jb 8f\n"                                      \
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"               \
	"	vmovdqu %ymm\\i, 4096+32*\\i(%r13)\n	.endr\n"                   \
	"	cmp $2, %r15d\n	jb 8f\n"                                      \
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n" \
	"	vmovdqu64 %zmm\\i, 8192+64*\\i(%r13)\n	.endr\n"                 \
	"	.irp i,0,1,2,3,4,5,6,7\n	kmovq %k\\i, 10240+8*\\i(%r13)\n	.endr\n" \
	"8:	pop %r15\n	pop %r14\n	pop %r13\n	pop %r12\n	pop %rbx\n	ret\n"
#define X16 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
#define X32 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"

__asm__(".text\n" RUN_BEGIN("fp_run_sse")
	X16 "	movdqu 64*\\i(%r12), %xmm\\i\n	.endr\n"
	"	call *%r14\n"
	X16 "	movdqu %xmm\\i, 64*\\i(%r13)\n	.endr\n"
	RUN_END
	RUN_BEGIN("fp_run_x87")
	X16 "	movdqu 64*\\i(%r12), %xmm\\i\n	.endr\n"
	"	fldl 2120(%r12)\n	fldl 2128(%r12)\n	fldcw 2136(%r12)\n"
	"	call *%r14\n"
	"	fnstcw 2136(%r13)\n	fldcw fcw_default(%rip)\n"
	"	fstpl 2128(%r13)\n	fstpl 2120(%r13)\n"
	X16 "	movdqu %xmm\\i, 64*\\i(%r13)\n	.endr\n"
	RUN_END
	RUN_BEGIN("fp_run_avx")
	X16 "	vmovdqu 64*\\i(%r12), %ymm\\i\n	.endr\n"
	"	call *%r14\n"
	X16 "	vmovdqu %ymm\\i, 64*\\i(%r13)\n	.endr\n"
	RUN_END
	RUN_BEGIN("fp_run_avx512")
	X32 "	vmovdqu64 64*\\i(%r12), %zmm\\i\n	.endr\n"
	".irp i,0,1,2,3,4,5,6,7\n	kmovq 2048+8*\\i(%r12), %k\\i\n	.endr\n"
	"	call *%r14\n"
	X32 "	vmovdqu64 %zmm\\i, 64*\\i(%r13)\n	.endr\n"
	".irp i,0,1,2,3,4,5,6,7\n	kmovq %k\\i, 2048+8*\\i(%r13)\n	.endr\n"
	RUN_END);

typedef long run_fn(const uint8_t *in, uint8_t *out, long a0, long a1, long (*site)(long, long), int level);
run_fn fp_run_sse, fp_run_x87, fp_run_avx, fp_run_avx512;

static uint8_t in[IMG] __attribute__((aligned(64))), out[IMG] __attribute__((aligned(64)));
static uint8_t initarea[16384] __attribute__((aligned(64)));
static int level; /* 0 SSE only, 1 AVX, 2 AVX-512 (F and BW) */
static unsigned hi16_off;   /* Hi16_ZMM's offset in an XSAVE frame */
static const uint32_t mxcsr_test = 0x7f80; /* round toward zero, all masked */
static const uint16_t fcw_test = 0xf7f;    /* the same for x87 */
const uint16_t fcw_default = 0x37f;

static uint64_t xcr0(void)
{
	uint32_t a, d;
	__asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(0));
	return (uint64_t)d << 32 | a;
}

static void detect(void)
{
	unsigned a, b, c, d;
	__cpuid(1, a, b, c, d);
	if (!(c & (1u << 27)) || !(c & (1u << 28)) || (xcr0() & 6) != 6)
		return;
	level = 1;
	__cpuid_count(7, 0, a, b, c, d);
	if ((b & (1u << 16)) && (b & (1u << 30)) && (xcr0() & 0xe6) == 0xe6) {
		level = 2;
		__cpuid_count(0xd, 7, a, b, c, d);
		hi16_off = b;
	}
}

/* initial puts the AVX and AVX-512 components (mask) in their initial
 * state: XRSTOR of a header that holds none of them. */
static void initial(uint64_t mask)
{
	if (level == 0)
		return;
	memset(initarea, 0, sizeof initarea);
	__asm__ volatile("xrstor64 %0" : : "m"(initarea), "a"((uint32_t)mask), "d"((uint32_t)(mask >> 32)));
}

static void fill(int seed)
{
	for (int i = 0; i < 2048; i++)
		in[i] = (uint8_t)(0x11 * (i / 64 + 1) + (i % 64) * 7 + seed);
	for (int i = 0; i < 64; i++)
		in[K + i] = (uint8_t)(0x5a + i * 3 + seed);
	memcpy(in + MXCSR, &mxcsr_test, 4);
	double s0 = 1.25 + seed, s1 = -3.5 - seed;
	memcpy(in + ST, &s0, 8);
	memcpy(in + ST + 8, &s1, 8);
	memcpy(in + ST + 16, &fcw_test, 2);
	memset(out, 0xee, sizeof out);
}

static void restore_mxcsr(void)
{
	uint32_t m = 0x1f80;
	__asm__ volatile("ldmxcsr %0" : : "m"(m));
}

static int fail(const char *kind, int round, const char *what, int reg)
{
	printf("FAIL %s round %d: %s %d differs\n", kind, round, what, reg);
	return 1;
}

static int zero(const uint8_t *p, int n)
{
	for (int i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* check compares out with in: width bytes of nregs registers, MXCSR,
 * and what must be in its initial state beyond them. */
static int check(const char *kind, int round, int nregs, int width, int x87)
{
	for (int i = 0; i < nregs; i++)
		if (memcmp(in + 64 * i, out + 64 * i, width) != 0)
			return fail(kind, round, "register", i);
	if (memcmp(in + MXCSR, out + MXCSR, 4) != 0)
		return fail(kind, round, "MXCSR", 0);
	if (x87 && memcmp(in + ST, out + ST, 16) != 0)
		return fail(kind, round, "x87 st", 0);
	if (x87 && memcmp(in + ST + 16, out + ST + 16, 2) != 0)
		return fail(kind, round, "x87 control word", 0);
	if (width == 64) {
		if (memcmp(in + K, out + K, 64) != 0)
			return fail(kind, round, "k registers", 0);
		return 0;
	}
	if (level >= 1)
		for (int i = 0; i < 16; i++)
			if (!zero(out + YMM + 32 * i + width, 32 - width))
				return fail(kind, round, "ymm upper half (initial) of", i);
	if (level >= 2) {
		for (int i = 0; i < 32; i++)
			if (!zero(out + ZMM + 64 * i + (i < 16 ? width : 0), 64 - (i < 16 ? width : 0)))
				return fail(kind, round, "zmm bits (initial) of", i);
		if (!zero(out + KOUT, 64))
			return fail(kind, round, "k registers (initial)", 0);
	}
	return 0;
}

static int rounds(const char *kind, run_fn *run, int nregs, int width, uint64_t init, int x87, int n)
{
	struct utsname u;
	struct stat st;
	for (int r = 0; r < n; r++) {
		fill(r);
		initial(init);
		run(in, out, (long)&u, 0, fp_site_uname, level);
		restore_mxcsr();
		if (check(kind, r, nregs, width, x87) || strcmp(u.sysname, "Linux") != 0)
			return 1;
		fill(r + 1);
		initial(init);
		long rc = run(in, out, (long)"/etc/hostname", (long)&st, fp_site_stat, level);
		restore_mxcsr();
		if (check(kind, r, nregs, width, x87))
			return 1;
		if (rc != 0)
			return fail(kind, r, "stat returned", (int)rc);
	}
	printf("%s ok %d\n", kind, n);
	return 0;
}

/* The signal case: the handler checks the frame and changes xmm1 (and
 * zmm16). */
static volatile int seen, frame_bad;
static uint8_t new_xmm1[16], new_zmm16[64];

static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
	(void)sig, (void)si;
	ucontext_t *uc = ctx;
	uint8_t *fp = (uint8_t *)uc->uc_mcontext.fpregs;
	seen++;
	uint32_t mx;
	memcpy(&mx, fp + 24, 4);
	if (mx != mxcsr_test)
		frame_bad = 100;
	for (int i = 0; i < 16 && !frame_bad; i++)
		if (memcmp(fp + 160 + 16 * i, in + 64 * i, 16) != 0)
			frame_bad = 1 + i;
	memcpy(fp + 160 + 16, new_xmm1, 16);
	if (level == 2 && !frame_bad) {
		uint64_t bv;
		memcpy(&bv, fp + 512, 8);
		if (!(bv & 0x80) || memcmp(fp + hi16_off, in + 64 * 16, 64) != 0)
			frame_bad = 200;
		memcpy(fp + hi16_off, new_zmm16, 64);
	}
}

static int signal_case(int n)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_usr1;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR1, &sa, NULL);
	for (int r = 0; r < n; r++) {
		fill(r);
		for (int i = 0; i < 16; i++)
			new_xmm1[i] = (uint8_t)(0xc0 + i + r);
		for (int i = 0; i < 64; i++)
			new_zmm16[i] = (uint8_t)(0x30 + i + r);
		initial(level == 2 ? 0 : 0xe4);
		seen = 0;
		run_fn *run = level == 2 ? fp_run_avx512 : fp_run_sse;
		run(in, out, getpid(), SIGUSR1, fp_site_kill, level);
		restore_mxcsr();
		if (seen != 1)
			return fail("signal", r, "handler runs", seen);
		if (frame_bad)
			return fail("signal", r, "frame, at", frame_bad);
		memcpy(in + 64 * 1, new_xmm1, 16); /* what sigreturn loads */
		if (level == 2)
			memcpy(in + 64 * 16, new_zmm16, 64);
		if (check("signal", r, level == 2 ? 32 : 16, level == 2 ? 64 : 16, 0))
			return 1;
	}
	printf("signal ok %d\n", n);
	return 0;
}

static const char *state(long (*site)(long, long))
{
	const uint8_t *p = (const uint8_t *)site;
	return p[0] == 0xff && p[1] == 0x24 && p[2] == 0x25 ? "patched" : "original";
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fpregs N\n");
		return 2;
	}
	int n = atoi(argv[1]);
	detect();
	setvbuf(stdout, NULL, _IONBF, 0);
	if (rounds("sse", fp_run_sse, 16, 16, 0xe4, 0, n))
		return 1;
	if (level >= 1 && rounds("avx", fp_run_avx, 16, 32, 0xe0, 0, n))
		return 1;
	if (level >= 2 && rounds("avx512", fp_run_avx512, 32, 64, 0, 0, n))
		return 1;
	if (signal_case(n))
		return 1;
	/* Last: once used, x87 may stay in use for the thread's life. */
	if (rounds("x87", fp_run_x87, 16, 16, 0xe4, 1, n))
		return 1;
	printf("cpu: %s\n", level == 2 ? "avx512" : level == 1 ? "avx" : "sse");
	printf("site %s\n", state(fp_site_uname));
	return 0;
}
