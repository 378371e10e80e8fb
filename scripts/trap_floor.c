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
 *
 * Prints "MODE ns_per_op".
 *
 *   gcc -O2 -o /tmp/trap_floor scripts/trap_floor.c
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
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
	if (strcmp(mode, "native") != 0) {
		switch_fs = !strcmp(mode, "trapfs");
		struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
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
