//go:build linux && amd64 && cgo

/* The trap tier's C core: the SIGSYS entry, the synchronous-signal entries,
 * guest threads, and the switch between guest and kbox (docs/tiers.md,
 * Trap tier).
 *
 * A trapped syscall goes:
 *   guest code --syscall--> filter: SECCOMP_RET_TRAP --> on_sigsys (this
 *   file, on the thread's alternate stack, FS still the guest's): save the
 *   guest's registers in the thread's kbox_thread, switch FS to kbox's
 *   (arch_prctl, or wrfsbase where the CPU has FSGSBASE), point the
 *   interrupted context at kbox_trap_entry on kbox's stack, return -->
 *   sigreturn --> kbox_trap_entry (ordinary context): save the FP state,
 *   call Go (kboxTrapServe, which dispatches the syscall) --> switch FS
 *   back --> kbox_trap_resume: restore the FP state and registers and jump
 *   to the guest, with no further syscall.
 *
 * Code here that runs with the guest's FS (the signal handlers until they
 * switch, the resume path) must not touch thread-local storage: no errno,
 * no libc call that may, no stack protector (built with
 * -fno-stack-protector). Raw syscalls only. */
#define _GNU_SOURCE
#include "core.h"

#include <asm/prctl.h>
#include <cpuid.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "_cgo_export.h"

#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1 /* si_code of a SECCOMP_RET_TRAP SIGSYS */
#endif

_Static_assert(offsetof(struct kbox_thread, xsave) == KT_OFF_XSAVE, "xsave offset");
_Static_assert(offsetof(struct kbox_thread, gregs[REG_RSP]) == KT_OFF_RSP, "rsp offset");
_Static_assert(offsetof(struct kbox_thread, gregs[REG_RIP]) == KT_OFF_RIP, "rip offset");
_Static_assert(offsetof(struct kbox_thread, fs_guest) == KT_OFF_FSGUEST, "fs_guest offset");
_Static_assert(offsetof(struct kbox_thread, in_kbox) == KT_OFF_INKBOX, "in_kbox offset");
_Static_assert(offsetof(struct kbox_thread, kicked) == KT_OFF_KICKED, "kicked offset");
_Static_assert(offsetof(struct kbox_thread, tid) == 228, "tid offset");
_Static_assert(offsetof(struct kbox_thread, self) == KT_OFF_SELF, "self offset");
_Static_assert(offsetof(struct kbox_thread, fpfast) == KT_OFF_FPFAST, "fpfast offset");
_Static_assert(offsetof(struct kbox_thread, fs_kept) == KT_OFF_FSKEPT, "fs_kept offset");
_Static_assert(KT_OFF_FASTFP == KT_AREA - KT_FASTFP_SIZE && KT_OFF_FASTFP % 64 == 0, "fast FP area");
_Static_assert(REG_CR2 + 1 == KT_NGREG, "gregs");

/* Slots: one per guest thread, in one reserved region, so that a signal
 * handler finds its thread's state from its own stack pointer alone (the
 * alternate stack lies in the slot): no thread-local storage needed.
 *   [kbox_thread + XSAVE area: KT_AREA][alternate stack: ALT][guard]  */
#define ALT_SIZE (96 << 10)
#define SLOT_SIZE (128 << 10)
#define MAX_SLOTS 4096

static char *slot_base;
static char slot_used[MAX_SLOTS]; /* the slot's memory is accessible */
/* Read by the assembly below too. */
static int use_xsave __attribute__((used)), use_fsgsbase __attribute__((used));
static uint32_t mxcsr_default __attribute__((used)) = 0x1f80;
static unsigned xsave_size;
static struct sigaction go_action[65]; /* the handlers ours replaced (Go's) */
static sigset_t guest_mask; /* host mask of a guest thread, both modes */

/* Signals a guest thread never blocks on the host: the filter's SIGSYS
 * (also kbox's kick), and those the kernel sends to the thread that
 * caused them. Everything else reaches kbox's own (Go) threads. */
static const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGPIPE, SIGXFSZ};

static inline long ksys(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline void set_fs(uint64_t base)
{
	if (use_fsgsbase)
		__asm__ volatile("wrfsbase %0" ::"r"(base) : "memory");
	else
		ksys(SYS_arch_prctl, ARCH_SET_FS, (long)base, 0, 0, 0, 0);
}

/* The slot whose alternate stack holds sp, or NULL: the handlers' way to
 * tell a guest thread from kbox's own. */
static struct kbox_thread *kt_of(void *sp)
{
	char *p = sp;
	if (slot_base == NULL || p < slot_base || p >= slot_base + (size_t)MAX_SLOTS * SLOT_SIZE)
		return NULL;
	struct kbox_thread *kt = (struct kbox_thread *)(slot_base + (size_t)(p - slot_base) / SLOT_SIZE * SLOT_SIZE);
	return kt->tid != 0 ? kt : NULL;
}

extern void kbox_trap_entry(void);
extern void kbox_trap_resume(struct kbox_thread *kt) __attribute__((noreturn));
extern char kbox_trap_window[], kbox_trap_window_end[];
extern char kbox_rw_entry[], kbox_rw_prologue_end[];

/* in_window: the thread is on its way back to the guest (FS and the FP
 * state are the guest's already, registers half loaded): what it was
 * interrupted in is still the saved state in kt. */
static int in_window(ucontext_t *uc)
{
	char *ip = (char *)uc->uc_mcontext.gregs[REG_RIP];
	return ip >= kbox_trap_window && ip < kbox_trap_window_end;
}

/* in_prologue: the thread came from a patched site's stub (rewrite tier)
 * and is saving its registers into kt, FS still the guest's: it is on its
 * way into kbox and must not be redirected (its registers are half
 * saved). */
static int in_prologue(ucontext_t *uc)
{
	char *ip = (char *)uc->uc_mcontext.gregs[REG_RIP];
	return ip >= kbox_rw_entry && ip < kbox_rw_prologue_end;
}

/* redirect saves the interrupted guest context (save) and makes the
 * handler's return land in kbox_trap_entry, in kbox mode. */
static void redirect(struct kbox_thread *kt, ucontext_t *uc, int save)
{
	greg_t *g = uc->uc_mcontext.gregs;
	if (save)
		for (int i = 0; i < KT_NGREG; i++)
			kt->gregs[i] = g[i];
	set_fs(kt->fs_kbox);
	kt->in_kbox = 1;
	g[REG_RSP] = (greg_t)kt->kstack;
	g[REG_RIP] = (greg_t)kbox_trap_entry;
	g[REG_RDI] = (greg_t)kt;
	g[REG_EFL] &= ~(greg_t)(0x400 | 0x100 | 0x40000); /* DF, TF, AC */
}

extern char kbox_native_check[], kbox_native_sc[], kbox_native_abort[];

/* in_native ends a syscall that kbox makes for the guest in kbox mode
 * (kbox_trap_native) when a kick comes, as a signal ends a blocking
 * syscall on Linux: before the syscall, it is not made and returns
 * -ERESTARTNOINTR (the guest makes it again after its handler); in it,
 * the kernel has rewound it for a restart (the kick's SA_RESTART: %rip
 * on the syscall, %rcx the address after it, which the syscall
 * instruction set) and it returns -ERESTARTSYS instead, for Go to apply
 * the guest's own flags (trap/restart.go). */
static void in_native(ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;
	char *ip = (char *)g[REG_RIP];
	if (ip >= kbox_native_check && ip < kbox_native_sc) {
		g[REG_RIP] = (greg_t)kbox_native_abort;
	} else if (ip == kbox_native_sc) {
		if (g[REG_RCX] == (greg_t)(kbox_native_sc + 2)) {
			g[REG_RAX] = -512; /* ERESTARTSYS */
			g[REG_RIP] = (greg_t)(kbox_native_sc + 2);
		} else {
			g[REG_RIP] = (greg_t)kbox_native_abort;
		}
	}
}

/* kicked: kbox wants the thread to look at its signals and exit flag. In
 * kbox mode the way out looks again (kicked); in guest mode, go and look
 * now. */
static void kicked(struct kbox_thread *kt, ucontext_t *uc)
{
	if (kt->in_kbox || in_prologue(uc)) {
		kt->kicked = 1;
		if (kt->in_kbox)
			in_native(uc);
		return;
	}
	kt->event = KT_KICK;
	redirect(kt, uc, !in_window(uc));
}

static void on_kick(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	struct kbox_thread *kt = kt_of(&uc);
	if (kt == NULL)
		return; /* a late kick (a thread on its way out) or from outside */
	kicked(kt, uc);
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	struct kbox_thread *kt = kt_of(&uc);
	if (kt == NULL)
		return; /* a stray SIGSYS on a kbox thread: nothing to do */
	if (si->si_code != SYS_SECCOMP) {
		/* Not the filter's: sent from outside. Taken as a kick. */
		kicked(kt, uc);
		return;
	}
	greg_t *g = uc->uc_mcontext.gregs;
	if (kt->in_kbox) {
		/* kbox code outside the text the filter trusts (code mapped
		 * after the filter was built) made a syscall: make it here. */
		g[REG_RAX] = ksys(si->si_syscall, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]);
		return;
	}
	kt->event = KT_SYSCALL;
	kt->nr = si->si_syscall;
	redirect(kt, uc, 1);
}

static void chain(int sig, siginfo_t *si, void *ctx)
{
	struct sigaction *a = &go_action[sig];
	if ((a->sa_flags & SA_SIGINFO) && a->sa_sigaction != NULL)
		a->sa_sigaction(sig, si, ctx);
	else if (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN && a->sa_handler != NULL)
		a->sa_handler(sig);
}

/* on_sync: a synchronous signal. In guest code it is the guest's (kbox
 * serves it as the guest's handler or default action); in kbox code, and
 * on kbox's own threads, it goes to Go's handler (a fault reading guest
 * memory becomes EFAULT there: debug.SetPanicOnFault). */
static void on_sync(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	if ((sig == SIGSEGV || sig == SIGBUS) && (kbox_hint_fault(uc) || kbox_stat_fault(uc)))
		return; /* hint.c's or hint_stat.c's access to guest memory */
	struct kbox_thread *kt = kt_of(&uc);
	if (kt == NULL || kt->in_kbox || in_window(uc) || in_prologue(uc)) {
		if (kt != NULL && kt->in_kbox)
			set_fs(kt->fs_kbox); /* Go's handler finds its own (kbox_ahead_serve runs with the guest's) */
		chain(sig, si, ctx);
		return;
	}
	kt->event = KT_SIGNAL;
	kt->signo = sig;
	memcpy(&kt->si, si, sizeof kt->si);
	redirect(kt, uc, 1);
}

/* kbox_trap_serve runs in ordinary context on kbox's stack, FS kbox's. */
void kbox_trap_serve(struct kbox_thread *kt)
{
	kboxTrapServe(kt);
	if (kt->action == KT_EXIT)
		__builtin_longjmp(kt->jmp, 1);
}

/* kbox_ahead_serve answers a patched site's call from what Go prepared
 * (hint.c, hint_stat.c): 1 when it did. It runs on kbox's stack with the
 * guest's FS (kbox_rw_serve), so that such an answer switches no FS: on
 * a CPU without FSGSBASE each switch is an arch_prctl, a trip through the
 * host kernel. What it calls touches no thread-local storage and calls
 * no libc function (a first call's lazy binding would). */
int kbox_ahead_serve(struct kbox_thread *kt) { return kbox_hint_serve(kt) || kbox_stat_serve(kt); }

/* KT_FP_SAVE saves the guest's FP state into the thread (%rbx) and gives
 * kbox's code its MXCSR and direction flag. */
#define KT_FP_SAVE \
	"	call kbox_fp_save\n" /* fpstate.c: the vector registers by hand, if it can */ \
	"	mov %eax, " KT_STR(KT_OFF_FPFAST) "(%rbx)\n" \
	"	test %eax, %eax\n" \
	"	jnz 3f\n" /* then x87 is in its initial state: no fninit (25 ns) */ \
	"	cmpl $0, use_xsave(%rip)\n" \
	"	je 1f\n" \
	"	mov $-1, %eax\n" \
	"	mov $-1, %edx\n" \
	"	xsave64 512(%rbx)\n" \
	"	jmp 2f\n" \
	"1:	fxsave64 512(%rbx)\n" \
	"2:	fninit\n" \
	"3:	ldmxcsr mxcsr_default(%rip)\n" \
	"	cld\n"

/* kbox_trap_entry: rdi = the thread, rsp = its kbox stack (16-aligned).
 * kbox_trap_resume: rdi = the thread; restores the guest's FP state,
 * switches FS to the guest's, leaves kbox mode, loads the registers and
 * jumps to the guest's rip with its rsp (through %gs, which holds the
 * thread's state: the general registers are the guest's by then). From
 * kbox_trap_window on, a kick restarts the way back (in_window). */
__asm__(".text\n"
	".globl kbox_trap_entry\n"
	".type kbox_trap_entry,@function\n"
	"kbox_trap_entry:\n"
	"	mov %rdi, %rbx\n"
	KT_FP_SAVE
	"	mov %rbx, %rdi\n"
	"	call kbox_trap_serve\n"
	"	mov %rbx, %rdi\n"
	"	jmp kbox_trap_resume\n"
	".size kbox_trap_entry, .-kbox_trap_entry\n"
	".type kbox_rw_serve,@function\n"
	"kbox_rw_serve:\n"
	KT_FP_SAVE
	"	mov %rbx, %rdi\n"
	"	call kbox_ahead_serve\n"
	"	test %eax, %eax\n"
	"	jz 4f\n"
	"	movl $1, " KT_STR(KT_OFF_FSKEPT) "(%rbx)\n"
	"	mov %rbx, %rdi\n"
	"	jmp kbox_trap_resume\n"
	"4:	mov 184(%rbx), %rsi\n" /* fs_kbox */
	"	cmpl $0, use_fsgsbase(%rip)\n"
	"	je 5f\n"
	"	wrfsbase %rsi\n"
	"	jmp 6f\n"
	"5:	mov $158, %eax\n" /* arch_prctl(ARCH_SET_FS, fs_kbox) */
	"	mov $0x1002, %edi\n"
	"	syscall\n"
	"6:	mov %rbx, %rdi\n"
	"	call kbox_trap_serve\n"
	"	mov %rbx, %rdi\n"
	"	jmp kbox_trap_resume\n"
	".size kbox_rw_serve, .-kbox_rw_serve\n"
	".globl kbox_trap_resume\n"
	".type kbox_trap_resume,@function\n"
	"kbox_trap_resume:\n"
	"	mov %rdi, %rbx\n"
	"	mov " KT_STR(KT_OFF_FPFAST) "(%rbx), %r8d\n"
	"	test %r8d, %r8d\n"
	"	jz 0f\n"
	"	call kbox_fp_restore\n" /* fpstate.c */
	"	jmp 2f\n"
	"0:	cmpl $0, use_xsave(%rip)\n"
	"	je 1f\n"
	"	mov $-1, %eax\n"
	"	mov $-1, %edx\n"
	"	xrstor64 512(%rbx)\n"
	"	jmp 2f\n"
	"1:	fxrstor64 512(%rbx)\n"
	"2:	cmpl $0, " KT_STR(KT_OFF_FSKEPT) "(%rbx)\n"
	"	jne 6f\n" /* FS is the guest's still (kbox_rw_serve) */
	"	mov 192(%rbx), %rsi\n"
	"	cmpl $0, use_fsgsbase(%rip)\n"
	"	je 3f\n"
	"	wrfsbase %rsi\n"
	"	jmp 4f\n"
	"3:	mov $158, %eax\n" /* arch_prctl(ARCH_SET_FS, fs_guest) */
	"	mov $0x1002, %edi\n"
	"	syscall\n"
	"	jmp 4f\n"
	"6:	movl $0, " KT_STR(KT_OFF_FSKEPT) "(%rbx)\n"
	"4:\n"
	".globl kbox_trap_window\n"
	"kbox_trap_window:\n"
	"	movl $0, 224(%rbx)\n" /* in_kbox */
	"	cmpl $0, 240(%rbx)\n" /* kicked while in kbox mode? */
	"	je 5f\n"
	"	movl $0, 240(%rbx)\n"
	"	mov $39, %eax\n" /* getpid */
	"	syscall\n"
	"	mov %rax, %rdi\n"
	"	mov 228(%rbx), %esi\n" /* tid */
	"	mov $" KT_STR(KT_KICK_SIG) ", %edx\n" /* comes back through on_kick, in_window */
	"	mov $234, %eax\n" /* tgkill */
	"	syscall\n"
	"5:	pushq 17*8(%rbx)\n"
	"	popfq\n"
	"	mov 0*8(%rbx), %r8\n"
	"	mov 1*8(%rbx), %r9\n"
	"	mov 2*8(%rbx), %r10\n"
	"	mov 3*8(%rbx), %r11\n"
	"	mov 4*8(%rbx), %r12\n"
	"	mov 5*8(%rbx), %r13\n"
	"	mov 6*8(%rbx), %r14\n"
	"	mov 7*8(%rbx), %r15\n"
	"	mov 8*8(%rbx), %rdi\n"
	"	mov 9*8(%rbx), %rsi\n"
	"	mov 10*8(%rbx), %rbp\n"
	"	mov 12*8(%rbx), %rdx\n"
	"	mov 13*8(%rbx), %rax\n"
	"	mov 14*8(%rbx), %rcx\n"
	"	mov 11*8(%rbx), %rbx\n"
	"	mov %gs:15*8, %rsp\n"
	"	jmp *%gs:16*8\n"
	".globl kbox_trap_window_end\n"
	"kbox_trap_window_end:\n"
	".size kbox_trap_resume, .-kbox_trap_resume\n");

/* kbox_trap_native(kt, nr, a0 ... a5): syscall nr in kbox mode, which a
 * kick ends (in_native): a syscall kbox continues for the guest (trap/cont.go)
 * may block (flock, F_SETLKW, accept). %rcx is 0 until the syscall
 * instruction sets it; kicked, once seen, means a kick came first. */
__asm__(".text\n"
	".globl kbox_trap_native\n"
	".type kbox_trap_native,@function\n"
	"kbox_trap_native:\n"
	"	mov %rdi, %r11\n"
	"	mov %rsi, %rax\n"
	"	mov %rdx, %rdi\n"
	"	mov %rcx, %rsi\n"
	"	mov %r8, %rdx\n"
	"	mov %r9, %r10\n"
	"	mov 8(%rsp), %r8\n"
	"	mov 16(%rsp), %r9\n"
	"	xor %ecx, %ecx\n"
	".globl kbox_native_check\n"
	"kbox_native_check:\n"
	"	cmpl $0, " KT_STR(KT_OFF_KICKED) "(%r11)\n"
	"	jne kbox_native_abort\n"
	".globl kbox_native_sc\n"
	"kbox_native_sc:\n"
	"	syscall\n"
	"	ret\n"
	".globl kbox_native_abort\n"
	"kbox_native_abort:\n"
	"	mov $-513, %rax\n" /* ERESTARTNOINTR */
	"	ret\n"
	".size kbox_trap_native, .-kbox_trap_native\n");

/* kbox_rw_entry: where a patched site's stub jumps (rewrite tier), with
 * the guest's registers but %eax = the syscall's number, %rcx = the
 * address after the site (as the kernel's syscall leaves it) and %r11
 * free (the kernel's syscall sets it to the flags), FS the guest's, %gs
 * the thread's kbox_thread. It saves the registers as on_sigsys would, in
 * the same place, switches to kbox's stack, saves the FP state and
 * answers from what was prepared ahead when it can (kbox_rw_serve,
 * kbox_ahead_serve), FS still the guest's; else it switches to kbox's FS
 * and goes on as a trapped syscall does (Go, then kbox_trap_resume,
 * which returns to the saved rip with rax = the result). No signal.
 * Until kbox_rw_prologue_end the handlers leave the thread alone (a kick
 * is remembered in kicked, as in kbox mode). */
__asm__(".text\n"
	".globl kbox_rw_entry\n"
	".type kbox_rw_entry,@function\n"
	"kbox_rw_entry:\n"
	"	mov %rsp, %gs:15*8\n"
	"	mov %gs:200, %rsp\n" /* kstack */
	"	pushfq\n"
	"	pop %r11\n"
	"	mov %r11, %gs:17*8\n"
	"	mov %rcx, %gs:16*8\n"
	"	mov %r8, %gs:0*8\n"
	"	mov %r9, %gs:1*8\n"
	"	mov %r10, %gs:2*8\n"
	"	mov %r11, %gs:3*8\n"
	"	mov %r12, %gs:4*8\n"
	"	mov %r13, %gs:5*8\n"
	"	mov %r14, %gs:6*8\n"
	"	mov %r15, %gs:7*8\n"
	"	mov %rdi, %gs:8*8\n"
	"	mov %rsi, %gs:9*8\n"
	"	mov %rbp, %gs:10*8\n"
	"	mov %rbx, %gs:11*8\n"
	"	mov %rdx, %gs:12*8\n"
	"	mov %rax, %gs:13*8\n"
	"	mov %rcx, %gs:14*8\n"
	"	mov %eax, %gs:212\n"  /* nr */
	"	movl $4, %gs:208\n"   /* event = KT_PATCHED */
	"	movl $1, %gs:224\n"   /* in_kbox */
	".globl kbox_rw_prologue_end\n"
	"kbox_rw_prologue_end:\n"
	"	mov %gs:424, %rbx\n"  /* self */
	"	jmp kbox_rw_serve\n"
	".size kbox_rw_entry, .-kbox_rw_entry\n");

uint64_t kbox_rw_entry_addr(void) { return (uint64_t)kbox_rw_entry; }

/* kbox_trap_reset_fpu gives the thread the FP state a new process starts
 * with (and a signal handler gets): every component in its initial state,
 * MXCSR and the x87 control word at their defaults. */
void kbox_trap_reset_fpu(struct kbox_thread *kt)
{
	kt->fpfast = 0;
	memset(kt->xsave, 0, xsave_size);
	*(uint16_t *)(kt->xsave + 0) = 0x37f;        /* FCW */
	*(uint32_t *)(kt->xsave + 24) = mxcsr_default; /* MXCSR */
	/* XSTATE_BV: SSE (as above); x87 from its initial state (FCW 0x37f
	 * too), so that the CPU counts it unused and the thread's trips
	 * into kbox keep to kbox_fp_save's way (fpstate.c). */
	if (use_xsave)
		*(uint64_t *)(kt->xsave + 512) = 0x2;
}

static void *thread_main(void *arg)
{
	struct kbox_thread *kt = arg;
	stack_t ss = {.ss_sp = (char *)kt + KT_AREA, .ss_size = ALT_SIZE};
	sigaltstack(&ss, NULL);
	kt->tid = (int)ksys(SYS_gettid, 0, 0, 0, 0, 0, 0);
	ksys(SYS_arch_prctl, ARCH_SET_GS, (long)kt, 0, 0, 0, 0);
	uint64_t fs;
	__asm__ volatile("mov %%fs:0, %0" : "=r"(fs)); /* glibc's TCB points to itself */
	kt->fs_kbox = fs;
	/* The first call into Go on a new thread binds an M to it (slow);
	 * Go also finds its signal stack here. */
	kboxTrapWarm(kt);
	if (kt->action == KT_EXIT)
		goto out;
	if (kt->install_filter) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    ksys(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, (long)kt->filter, 0, 0, 0) != 0) {
			kt->action = KT_EXIT;
			kboxTrapFailed(kt, errno);
			goto out;
		}
	}
	pthread_sigmask(SIG_SETMASK, &guest_mask, NULL);
	if (__builtin_setjmp(kt->jmp) == 0) {
		char here;
		kt->kstack = ((uint64_t)&here - 512) & ~(uint64_t)15;
		kt->in_kbox = 1;
		kbox_trap_resume(kt);
	}
out:
	/* KT_EXIT: back in kbox mode. */
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	kboxTrapGone(kt);
	return NULL;
}

int kbox_trap_start(struct kbox_thread *kt)
{
	pthread_attr_t a;
	pthread_t t;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 8 << 20);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread starts with all blocked */
	int err = pthread_create(&t, &a, thread_main, kt);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	return err;
}

struct kbox_thread *kbox_trap_thread(int slot)
{
	if (slot < 0 || slot >= MAX_SLOTS)
		return NULL;
	char *p = slot_base + (size_t)slot * SLOT_SIZE;
	if (mprotect(p, KT_AREA + ALT_SIZE, PROT_READ | PROT_WRITE) != 0)
		return NULL;
	slot_used[slot] = 1;
	struct kbox_thread *kt = (struct kbox_thread *)p;
	memset(kt, 0, offsetof(struct kbox_thread, xsave));
	kt->slot = slot;
	kt->self = kt;
	kt->xhint = kbox_hint_alloc(slot);
	return kt;
}

/* kbox_trap_slot_free reports whether the slot's last thread is gone (its
 * tid no longer exists), so that the slot may be used again. */
int kbox_trap_slot_free(int slot)
{
	if (slot < 0 || slot >= MAX_SLOTS)
		return 0;
	if (!slot_used[slot])
		return 1;
	struct kbox_thread *kt = (struct kbox_thread *)(slot_base + (size_t)slot * SLOT_SIZE);
	return kt->tid == 0 || ksys(SYS_tgkill, getpid(), kt->tid, 0, 0, 0, 0) == -ESRCH;
}

int kbox_trap_slots(void) { return MAX_SLOTS; }
int kbox_trap_use_xsave(void) { return use_xsave; }

/* kbox_trap_xcr0: the state components XSAVE saves (a signal frame's
 * xfeatures). */
uint64_t kbox_trap_xcr0(void)
{
	if (!use_xsave)
		return 3;
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}
int kbox_trap_xsave_size(void) { return (int)xsave_size; }
int kbox_trap_fsgsbase(void) { return use_fsgsbase; }

static int install(int sig, void (*h)(int, siginfo_t *, void *))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = h;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigfillset(&sa.sa_mask);
	return sigaction(sig, &sa, &go_action[sig]);
}

int kbox_trap_init(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return -ENOSYS;
	use_xsave = (c >> 27) & 1; /* OSXSAVE */
	xsave_size = 512;
	if (use_xsave) {
		__cpuid_count(0xd, 0, a, b, c, d);
		xsave_size = b; /* for the features enabled in XCR0 */
	}
	if (xsave_size < 512 || KT_OFF_XSAVE + xsave_size > KT_AREA)
		return -ENOSPC;
	if (use_xsave)
		kbox_fp_init(xsave_size);
	use_fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0; /* HWCAP2_FSGSBASE */
	slot_base = mmap(NULL, (size_t)MAX_SLOTS * SLOT_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (slot_base == MAP_FAILED) {
		slot_base = NULL;
		return -ENOMEM;
	}
	sigfillset(&guest_mask);
	sigdelset(&guest_mask, SIGSYS);
	sigdelset(&guest_mask, KT_KICK_SIG);
	for (unsigned i = 0; i < sizeof sync_sigs / sizeof sync_sigs[0]; i++)
		sigdelset(&guest_mask, sync_sigs[i]);
	if (install(SIGSYS, on_sigsys) != 0 || install(KT_KICK_SIG, on_kick) != 0)
		return -errno;
	for (unsigned i = 0; i < sizeof sync_sigs / sizeof sync_sigs[0]; i++)
		if (install(sync_sigs[i], on_sync) != 0)
			return -errno;
	return 0;
}

/* kbox_trap_die ends kbox with sig, as the guest died of it: default
 * action, no core file (it would be kbox's, not the guest's). */
void kbox_trap_die(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	struct rlimit0 {
		unsigned long cur, max;
	} no = {0, 0};
	ksys(SYS_prlimit64, 0, RLIMIT_CORE, (long)&no, 0, 0, 0);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	ksys(SYS_tgkill, getpid(), ksys(SYS_gettid, 0, 0, 0, 0, 0, 0), sig, 0, 0, 0);
}
