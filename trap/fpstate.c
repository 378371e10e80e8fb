//go:build linux && amd64 && cgo

/* The guest's vector state across a trip into kbox (trap and rewrite
 * tiers), moved by hand when it can be.
 *
 * kbox's Go and C code may change every vector register, so a trip saves
 * the guest's and puts them back. XSAVE and XRSTOR of the whole state
 * take about 140 ns a trip on a CPU with AVX-512 (XRSTOR alone 70 to
 * 100 ns, whatever it loads), against about 10 ns for moves of zmm0-31,
 * k0-7 and MXCSR (docs/tiers.md, "The guest's FP state"). So
 * kbox_fp_save asks the CPU which components are in use (XGETBV with
 * ECX 1) and, when they are only ones it can move (SSE, AVX, AVX-512's
 * three, PKRU, which kbox never changes), stores the registers of the
 * widest kind in use at KT_OFF_FASTFP and returns that kind; else (x87
 * in use, AMX, a CPU without XGETBV 1) it returns 0 and kbox_trap_entry
 * uses XSAVE (and kbox_trap_resume XRSTOR). kbox_fp_restore loads them
 * back. A component the guest had in its initial state is left in it:
 * the VEX loads of the narrower kinds and vzeroupper zero the upper bits,
 * and zmm16-31 and k0-7 are zeroed (kbox's code, a memcpy in LKL, may
 * have used them). x87: the guest's was in its initial state, and kbox's
 * code uses no x87, so it still is (kbox_trap_entry skips its fninit).
 *
 * Go reads and writes the XSAVE area (signal frames, sigreturn, a new
 * thread's copy): kbox_trap_fp_sync first writes the registers moved by
 * hand into it, in XSAVE's standard format, and the area is the guest's
 * state again (fpfast 0). */
#include <cpuid.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

/* fp_vec: what kbox_fp_save moves, by the CPU and XCR0: 0 nothing (XSAVE
 * every trip), 1 xmm0-15, 2 ymm0-15, 3 zmm0-31 and k0-7. fp_slow: the
 * in-use bits that take a trip to XSAVE. fp_pkru: XCR0 has PKRU. Read by
 * the assembly below. */
static int fp_vec __attribute__((used));
static uint32_t fp_slow __attribute__((used));
static int fp_pkru __attribute__((used));

/* Offsets of the components in XSAVE's standard format, and the area's
 * size and MXCSR mask, for kbox_trap_fp_sync. */
static unsigned off_ymm, off_k, off_zhi, off_hi16, off_pkru, fp_area;
static uint32_t mxcsr_mask;

enum {
	XF_X87 = 1 << 0,
	XF_SSE = 1 << 1,
	XF_AVX = 1 << 2,
	XF_OPMASK = 1 << 5,
	XF_ZMM_HI256 = 1 << 6,
	XF_HI16_ZMM = 1 << 7,
	XF_AVX512 = XF_OPMASK | XF_ZMM_HI256 | XF_HI16_ZMM,
	XF_PKRU = 1 << 9,
};

static uint64_t xgetbv(uint32_t c)
{
	uint32_t a, d;
	__asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(c));
	return (uint64_t)d << 32 | a;
}

/* kbox_fp_init decides what kbox_fp_save moves; kbox_trap_init calls it
 * once XSAVE is known to be on. Returns fp_vec. */
int kbox_fp_init(unsigned xsave_size)
{
	unsigned a, b, c, d;
	fp_vec = 0;
	if (KT_OFF_XSAVE + xsave_size > KT_OFF_FASTFP)
		return 0; /* an XSAVE area as large as AMX's: XSAVE always */
	__cpuid_count(0xd, 1, a, b, c, d);
	if (!(a & (1 << 2)))
		return 0; /* no XGETBV with ECX 1 */
	uint64_t xcr0 = xgetbv(0);
	if (!(xcr0 & XF_SSE))
		return 0;
	uint8_t fx[512] __attribute__((aligned(16)));
	memset(fx, 0, sizeof fx);
	__asm__ volatile("fxsave64 %0" : "=m"(fx));
	memcpy(&mxcsr_mask, fx + 28, 4);
	if (mxcsr_mask == 0)
		mxcsr_mask = 0xffbf; /* the default when the field is 0 */
	fp_area = xsave_size;
	int vec = 1;
	__cpuid_count(1, 0, a, b, c, d);
	int avx = (c >> 28) & 1;
	if (avx && (xcr0 & XF_AVX)) {
		__cpuid_count(0xd, 2, a, b, c, d);
		off_ymm = b;
		vec = 2;
		__cpuid_count(7, 0, a, b, c, d);
		/* AVX512F; BW (64-bit k moves); VL (xmm16-31) */
		int f = (b >> 16) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
		if (f && bw && vl && (xcr0 & XF_AVX512) == XF_AVX512) {
			__cpuid_count(0xd, 5, a, b, c, d);
			off_k = b;
			__cpuid_count(0xd, 6, a, b, c, d);
			off_zhi = b;
			__cpuid_count(0xd, 7, a, b, c, d);
			off_hi16 = b;
			vec = 3;
		}
	}
	if (vec < 3 && (xcr0 & XF_AVX512))
		return 0; /* AVX-512 state kbox could not zero by hand (no VL): XSAVE always */
	if (xcr0 & XF_PKRU) {
		__cpuid_count(0xd, 9, a, b, c, d);
		off_pkru = b;
		fp_pkru = 1;
	}
	uint32_t moved = XF_SSE | XF_PKRU | (vec >= 2 ? XF_AVX : 0) | (vec == 3 ? XF_AVX512 : 0);
	fp_slow = ~moved;
	fp_vec = vec;
	return vec;
}

/* kbox_trap_fp_sync makes kt's XSAVE area hold the guest's vector state:
 * what kbox_fp_save moved, in the standard format, with XSTATE_BV saying
 * which components it holds (the others are in their initial state, as
 * they were). The thread is in kbox mode. */
void kbox_trap_fp_sync(struct kbox_thread *kt)
{
	int kind = kt->fpfast;
	if (kind == 0)
		return;
	const uint8_t *f = (const uint8_t *)kt + KT_OFF_FASTFP;
	uint8_t *x = kt->xsave;
	memset(x, 0, fp_area);
	*(uint16_t *)(x + 0) = 0x37f; /* FCW: x87 is in its initial state */
	memcpy(x + 24, f, 4);         /* MXCSR */
	memcpy(x + 28, &mxcsr_mask, 4);
	uint64_t bv = XF_SSE;
	for (int i = 0; i < 16; i++)
		memcpy(x + 160 + 16 * i, f + 128 + 64 * i, 16);
	if (kind >= 2) {
		for (int i = 0; i < 16; i++)
			memcpy(x + off_ymm + 16 * i, f + 128 + 64 * i + 16, 16);
		bv |= XF_AVX;
	}
	if (kind == 3) {
		memcpy(x + off_k, f + 64, 64);
		for (int i = 0; i < 16; i++)
			memcpy(x + off_zhi + 32 * i, f + 128 + 64 * i + 32, 32);
		memcpy(x + off_hi16, f + 128 + 64 * 16, 16 * 64);
		bv |= XF_AVX512;
	}
	if (fp_pkru) {
		memcpy(x + off_pkru, f + 4, 4);
		bv |= XF_PKRU;
	}
	*(uint64_t *)(x + 512) = bv;
	kt->fpfast = 0;
}

/* The registers' moves, in .irp loops: register i at 128 + 64*i. */
#define X16 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
#define X32 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
#define K8 ".irp i,0,1,2,3,4,5,6,7\n"

/* kbox_fp_save (called by kbox_trap_entry, %rbx the thread, the guest's
 * general registers saved): moves the guest's vector registers and MXCSR
 * to KT_OFF_FASTFP and returns their kind in %eax, or 0 when XSAVE must
 * save the state. Clobbers %rax, %rcx, %rdx, %rdi, %r9. */
__asm__(".text\n"
	".globl kbox_fp_save\n"
	".type kbox_fp_save,@function\n"
	"kbox_fp_save:\n"
	"	cmpl $0, fp_vec(%rip)\n"
	"	je 9f\n"
	"	mov $1, %ecx\n"
	"	xgetbv\n" /* the components in use */
	"	test %edx, %edx\n"
	"	jnz 9f\n"
	"	test %eax, fp_slow(%rip)\n"
	"	jnz 9f\n"
	"	mov %eax, %r9d\n"
	"	lea " KT_STR(KT_OFF_FASTFP) "(%rbx), %rdi\n"
	"	stmxcsr (%rdi)\n"
	"	cmpl $0, fp_pkru(%rip)\n"
	"	je 1f\n"
	"	xor %ecx, %ecx\n"
	"	rdpkru\n"
	"	mov %eax, 4(%rdi)\n"
	"1:	test $0xe0, %r9d\n" /* AVX-512 in use (fp_vec 3: fp_slow has them otherwise) */
	"	jnz 3f\n"
	"	test $4, %r9d\n" /* AVX in use (fp_vec 2 or 3) */
	"	jnz 2f\n"
	X16 "	movaps %xmm\\i, 128+64*\\i(%rdi)\n	.endr\n"
	"	mov $1, %eax\n"
	"	ret\n"
	"2:\n" X16 "	vmovdqu %ymm\\i, 128+64*\\i(%rdi)\n	.endr\n"
	"	mov $2, %eax\n"
	"	ret\n"
	"3:\n" X32 "	vmovdqu64 %zmm\\i, 128+64*\\i(%rdi)\n	.endr\n"
	K8 "	kmovq %k\\i, 64+8*\\i(%rdi)\n	.endr\n"
	"	mov $3, %eax\n"
	"	ret\n"
	"9:	xor %eax, %eax\n"
	"	ret\n"
	".size kbox_fp_save, .-kbox_fp_save\n");

/* kbox_fp_restore (called by kbox_trap_resume, %rbx the thread, %r8d its
 * fpfast, not 0): loads what kbox_fp_save moved. For a narrower kind,
 * what the guest had in its initial state is made so again without asking
 * the CPU (XGETBV costs as much as the moves): zmm16-31 and k0-7 zeroed
 * (EVEX.128 and k writes zero the rest of the register), and for xmm
 * vzeroupper, which also gives the guest's SSE code a clean upper state,
 * as XRSTOR of an initial AVX state did. Clobbers %rdi. */
__asm__(".text\n"
	".globl kbox_fp_restore\n"
	".type kbox_fp_restore,@function\n"
	"kbox_fp_restore:\n"
	"	lea " KT_STR(KT_OFF_FASTFP) "(%rbx), %rdi\n"
	"	cmp $3, %r8d\n"
	"	je 3f\n"
	"	cmpl $3, fp_vec(%rip)\n"
	"	jne 1f\n"
	".irp i,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
	"	vpxord %xmm\\i, %xmm\\i, %xmm\\i\n	.endr\n"
	K8 "	kxorw %k\\i, %k\\i, %k\\i\n	.endr\n"
	"1:	cmp $2, %r8d\n"
	"	je 2f\n"
	"	cmpl $2, fp_vec(%rip)\n"
	"	jb 11f\n"
	"	vzeroupper\n"
	"11:\n" X16 "	movaps 128+64*\\i(%rdi), %xmm\\i\n	.endr\n"
	"	jmp 9f\n"
	"2:\n" X16 "	vmovdqu 128+64*\\i(%rdi), %ymm\\i\n	.endr\n" /* VEX: bits 256 up zeroed */
	"	jmp 9f\n"
	"3:\n" X32 "	vmovdqu64 128+64*\\i(%rdi), %zmm\\i\n	.endr\n"
	K8 "	kmovq 64+8*\\i(%rdi), %k\\i\n	.endr\n"
	"9:	ldmxcsr (%rdi)\n"
	"	ret\n"
	".size kbox_fp_restore, .-kbox_fp_restore\n");
