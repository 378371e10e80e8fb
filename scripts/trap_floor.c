/*
 * trap_floor: the cost floor of an in-process SIGSYS trap tier on this
 * machine, measured with no kbox at all (docs/benchmarks.md). A "guest"
 * stub in a page of its own makes stat(2) with a raw syscall; a seccomp
 * filter returns SECCOMP_RET_TRAP for syscalls made from that page and
 * allows everything else; the SIGSYS handler answers by making the real
 * stat itself (from allowed code) and writing the result into the
 * interrupted context.
 *
 *   trap_floor MODE N [PATH]
 *     native  N stats called directly
 *     trap    N stats trapped and answered in the handler
 *     trapfs  as trap, plus the two thread-pointer switches a tier needs
 *             when the CPU has no FSGSBASE: arch_prctl(ARCH_SET_FS) to
 *             kbox's and back to the guest's
 *     fsbase  N pairs of arch_prctl(ARCH_SET_FS) alone
 *     handoff     the handler hands the syscall to a service thread
 *                 (futex wake, futex wait) and the service thread makes
 *                 the stat: no thread-pointer switch, two wake-ups
 *     handoffspin as handoff, both sides spin up to SPIN iterations
 *                 (env TRAP_FLOOR_SPIN, default 2000) before sleeping
 *     handoff1cpu as handoff with both threads pinned to one CPU
 *     patched     the rewrite tier's patched site, no signal: the two
 *                 thread-pointer switches (arch_prctl to kbox's FS and
 *                 back) around the stat, made from ordinary code
 *     openclose   N opens and closes (O_RDONLY) of PATH, natively
 *     fdplace     what an in-process tier's open and close of an image
 *                 file do on the host, with no kbox: a new description of
 *                 the file (openat by name), moved onto the guest's number
 *                 (dup3 over a placeholder, close), and the close, the
 *                 placeholder put back (dup3)
 *     fdlend      the same with a kept description (trap/lend.go): put at
 *                 offset 0 (lseek), moved onto the guest's number (dup3),
 *                 and at the close the placeholder put back (dup3) and
 *                 its status flags read (F_GETFL)
 *     redirect    the handler switches FS to kbox's (arch_prctl), points
 *                 the context at a trampoline and returns; after
 *                 sigreturn the trampoline makes the stat in ordinary
 *                 context, switches FS back and jumps to the guest with
 *                 no further syscall (ret past the red zone)
 *
 * Prints "MODE ns_per_op".
 *
 *   gcc -O2 -o /tmp/trap_floor scripts/trap_floor.c
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#if !defined(__x86_64__)
int main(void) { fprintf(stderr, "trap_floor: x86_64 only\n"); return 2; }
#else

typedef long (*stub_fn)(long nr, long a1, long a2, long a3);

/* mov %rdi,%rax; mov %rsi,%rdi; mov %rdx,%rsi; mov %rcx,%rdx; syscall; ret */
static const unsigned char stub_code[] = {0x48, 0x89, 0xf8, 0x48, 0x89, 0xf7, 0x48, 0x89,
					  0xd6, 0x48, 0x89, 0xca, 0x0f, 0x05, 0xc3};

static unsigned long fs_kbox, fs_guest;
static int switch_fs;

static long raw(long nr, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

/* hand-off: one request slot shared by the guest thread and the service
 * thread; seq odd = request posted, even = answered. */
static _Atomic unsigned req_seq;
static long req_nr, req_a[3], req_ret;
static long spin_max;

static long futex(_Atomic unsigned *w, int op, unsigned v)
{
	return raw(SYS_futex, (long)w, op, v);
}

/* wait until *w != old, spinning first */
static void wait_change(_Atomic unsigned *w, unsigned old)
{
	for (long i = 0; i < spin_max; i++) {
		if (atomic_load_explicit(w, memory_order_acquire) != old)
			return;
		__builtin_ia32_pause();
	}
	while (atomic_load_explicit(w, memory_order_acquire) == old)
		futex(w, FUTEX_WAIT_PRIVATE, old);
}

static void *service(void *arg)
{
	unsigned seen = 0;
	for (;;) {
		wait_change(&req_seq, seen);
		seen = atomic_load(&req_seq); /* odd: a request */
		req_ret = raw(req_nr, req_a[0], req_a[1], req_a[2]);
		atomic_store_explicit(&req_seq, seen + 1, memory_order_release);
		seen++;
		futex(&req_seq, FUTEX_WAKE_PRIVATE, 1);
	}
	return arg;
}

static void on_sigsys_handoff(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	req_nr = si->si_syscall;
	req_a[0] = g[REG_RDI], req_a[1] = g[REG_RSI], req_a[2] = g[REG_RDX];
	unsigned s = atomic_fetch_add_explicit(&req_seq, 1, memory_order_release) + 1;
	futex(&req_seq, FUTEX_WAKE_PRIVATE, 1);
	wait_change(&req_seq, s);
	g[REG_RAX] = req_ret;
}

/* redirect: the guest's registers are saved here by the handler; the
 * trampoline serves the call in ordinary context. */
static greg_t saved[NGREG];
static long saved_nr;
static char tramp_stack[65536] __attribute__((aligned(16)));
extern void tramp_entry(void);
void tramp_serve(void)
{
	saved[REG_RAX] = raw(saved_nr, saved[REG_RDI], saved[REG_RSI], saved[REG_RDX]);
	raw(SYS_arch_prctl, ARCH_SET_FS, fs_guest, 0);
}
/* tramp_entry: call tramp_serve on the kbox stack, then restore the guest's
 * registers we use (rax, rsp, rip; the model's stub clobbers nothing else
 * that matters) and return with ret $128 past the red zone. */
__asm__(".text\n.globl tramp_entry\ntramp_entry:\n"
	"call tramp_serve\n"
	"mov saved+8*15(%rip), %rsp\n"   /* REG_RSP */
	"sub $136, %rsp\n"
	"mov saved+8*16(%rip), %rax\n"   /* REG_RIP */
	"mov %rax, (%rsp)\n"
	"mov saved+8*13(%rip), %rax\n"   /* REG_RAX */
	"ret $128\n");

static void on_sigsys_redirect(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	raw(SYS_arch_prctl, ARCH_SET_FS, fs_kbox, 0);
	memcpy(saved, g, sizeof saved);
	saved_nr = si->si_syscall;
	g[REG_RSP] = (greg_t)(tramp_stack + sizeof tramp_stack - 8);
	g[REG_RIP] = (greg_t)tramp_entry;
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	if (switch_fs)
		raw(SYS_arch_prctl, ARCH_SET_FS, fs_kbox, 0);
	g[REG_RAX] = raw(si->si_syscall, g[REG_RDI], g[REG_RSI], g[REG_RDX]);
	if (switch_fs)
		raw(SYS_arch_prctl, ARCH_SET_FS, fs_guest, 0);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *mode = argv[1], *path = argc > 3 ? argv[3] : "/etc/hostname";
	long n = atol(argv[2]);
	unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(page, stub_code, sizeof stub_code);
	stub_fn stub = (stub_fn)page;
	struct stat st;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs_kbox);
	fs_guest = fs_kbox;
	if (!strcmp(mode, "fsbase")) {
		double t0 = now();
		for (long i = 0; i < n; i++) {
			raw(SYS_arch_prctl, ARCH_SET_FS, fs_kbox, 0);
			raw(SYS_arch_prctl, ARCH_SET_FS, fs_guest, 0);
		}
		printf("fsbase %.1f\n", (now() - t0) / n);
		return 0;
	}
	if (!strcmp(mode, "fdlend")) {
		int ph = open("/dev/null", O_RDONLY | O_CLOEXEC), at = dup(ph);
		int kept = open(path, O_RDONLY | O_CLOEXEC);
		double t0 = 0;
		for (long i = -n / 10; i < n; i++) {
			if (i == 0)
				t0 = now();
			lseek(kept, 0, SEEK_SET);
			dup3(kept, at, O_CLOEXEC);
			dup3(ph, at, O_CLOEXEC);
			if (fcntl(kept, F_GETFL) < 0) {
				perror("fcntl");
				return 1;
			}
		}
		printf("%s %.1f\n", mode, (now() - t0) / n);
		return 0;
	}
	if (!strcmp(mode, "openclose") || !strcmp(mode, "fdplace")) {
		int place = !strcmp(mode, "fdplace");
		int ph = open("/dev/null", O_RDONLY | O_CLOEXEC), at = dup(ph);
		double t0 = 0;
		for (long i = -n / 10; i < n; i++) {
			if (i == 0)
				t0 = now();
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				perror("open");
				return 1;
			}
			if (!place) {
				close(fd);
				continue;
			}
			dup3(fd, at, O_CLOEXEC);
			close(fd);
			dup3(ph, at, O_CLOEXEC);
		}
		printf("%s %.1f\n", mode, (now() - t0) / n);
		return 0;
	}
	if (!strcmp(mode, "patched")) {
		for (long i = 0; i < n / 10; i++)
			stub(SYS_stat, (long)path, (long)&st, 0);
		double t0 = now();
		for (long i = 0; i < n; i++) {
			raw(SYS_arch_prctl, ARCH_SET_FS, fs_kbox, 0);
			long r = stub(SYS_stat, (long)path, (long)&st, 0);
			raw(SYS_arch_prctl, ARCH_SET_FS, fs_guest, 0);
			if (r != 0) {
				fprintf(stderr, "stat failed\n");
				return 1;
			}
		}
		printf("patched %.1f\n", (now() - t0) / n);
		return 0;
	}
	if (strcmp(mode, "native") != 0) {
		switch_fs = !strcmp(mode, "trapfs");
		struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
		if (!strncmp(mode, "handoff", 7)) {
			sa.sa_sigaction = on_sigsys_handoff;
			if (!strcmp(mode, "handoffspin"))
				spin_max = getenv("TRAP_FLOOR_SPIN") ? atol(getenv("TRAP_FLOOR_SPIN")) : 2000;
			if (!strcmp(mode, "handoff1cpu")) {
				cpu_set_t cs;
				CPU_ZERO(&cs);
				CPU_SET(0, &cs);
				sched_setaffinity(0, sizeof cs, &cs); /* inherited by the service */
			}
			pthread_t t;
			pthread_create(&t, NULL, service, NULL);
		} else if (!strcmp(mode, "redirect")) {
			sa.sa_sigaction = on_sigsys_redirect;
			fs_guest = fs_kbox; /* the model's guest shares libc's TLS */
		}
		sigaction(SIGSYS, &sa, NULL);
		uint64_t lo = (uint64_t)page;
		struct sock_filter f[] = {
			/* trap if instruction_pointer is in the stub's page */
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(lo >> 32), 0, 3),
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
			BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)lo, 0, 1),
			BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)lo + 4096, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		};
		struct sock_fprog prog = {sizeof f / sizeof f[0], f};
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
			perror("seccomp");
			return 1;
		}
	}
	for (long i = 0; i < n / 10; i++)
		stub(SYS_stat, (long)path, (long)&st, 0);
	double t0 = now();
	for (long i = 0; i < n; i++)
		if (stub(SYS_stat, (long)path, (long)&st, 0) != 0) {
			fprintf(stderr, "stat failed\n");
			return 1;
		}
	printf("%s %.1f\n", mode, (now() - t0) / n);
	return 0;
}
#endif
