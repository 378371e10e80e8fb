/* rwdyn: syscall sites whose number is in a register, as libc's generic
 * entries have them (musl's __syscall_cp_c, glibc's syscall(3)), and what
 * the guest sees when the rewrite tier patches them (docs/tiers.md,
 * Rewrite tier).
 *
 *   rwdyn calls N     open, read, pread, close, a directory's entries, a
 *                     read of a directory (EISDIR), a path escape, kill
 *                     with a handler that uses the site too: N rounds
 *   rwdyn regs N      registers, xmm0 and the flags (CF, DF) survive the
 *                     site, for a number kbox serves and one the kernel does
 *   rwdyn cancel      pthread_cancel of a thread blocked in a read at
 *                     musl's __syscall_cp_asm once that site is patched:
 *                     musl's handler acts only when the interrupted
 *                     address is in __cp_begin ... __cp_end
 *
 * "site patched" reads the lead's bytes: FF 24 25 is the rewrite tier's
 * jump; natively (and in the other tiers) the lead is still there. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rwregs.h"

/* rw_dyn(nr, a, b, c, d, e, f): musl's __syscall_cp_c, byte for byte. The
 * lead is `mov 0x8(%rsp),%r9` (the seventh argument), then one move. 64
 * NOPs before it keep every back sweep of the site finder in step. */
__asm__(".text\n"
	".p2align 4\n"
	".fill 64, 1, 0x90\n"
	".globl rw_dyn\n"
	".type rw_dyn,@function\n"
	"rw_dyn:\n"
	"	mov %rdi, %rax\n"
	"	mov %r8, %r10\n"
	"	mov %rsi, %rdi\n"
	"	mov %r9, %r8\n"
	"	mov %rdx, %rsi\n"
	".globl rw_dyn_lead\n"
	"rw_dyn_lead:\n"
	"	mov 0x8(%rsp), %r9\n"
	"	mov %rcx, %rdx\n"
	"	syscall\n"
	"	ret\n");
long rw_dyn(long nr, long a, long b, long c, long d, long e, long f);
extern unsigned char rw_dyn_lead[];

/* rw_dynregs(nr): magic values in every register the kernel preserves
 * (all but rax, rcx, r11) and in xmm0, CF and DF set, the number from a
 * register; the lead is `mov $imm32,%ecx`, then `mov %rdx,%r10`; then
 * everything stored to regs_out (rwregs.h). */
__asm__(".text\n"
	".p2align 4\n"
	".globl rw_dynregs\n"
	".type rw_dynregs,@function\n"
	"rw_dynregs:\n"
	"	mov %rdi, %rax\n"
	RW_REGS_ENTER
	"	std\n"
	"	stc\n"
	".fill 16, 1, 0x90\n"
	".globl rw_dynregs_lead\n"
	"rw_dynregs_lead:\n"
	"	mov $0x12345678, %ecx\n"
	"	mov %rdx, %r10\n"
	"	syscall\n"
	RW_REGS_LEAVE);
void rw_dynregs(long nr);
extern unsigned char rw_dynregs_lead[];

static const char *state(const unsigned char *s)
{
	if (s[0] == 0xFF && s[1] == 0x24 && s[2] == 0x25)
		return "patched";
	return "original";
}

static long n_arg(int argc, char **argv, int i, long def)
{
	return argc > i ? atol(argv[i]) : def;
}

static volatile long handled, handler_bad;
static void on_usr1(int sig)
{
	(void)sig;
	/* The site again, from the handler: served and native numbers. */
	if (rw_dyn(SYS_getuid, 0, 0, 0, 0, 0, 0) != getuid() || rw_dyn(SYS_sched_yield, 0, 0, 0, 0, 0, 0) != 0)
		handler_bad++;
	handled++;
}

#define FAIL(...)                             \
	do {                                  \
		printf("calls: " __VA_ARGS__); \
		return 1;                     \
	} while (0)

static int mode_calls(long n)
{
	char buf[128], name[128];
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	long pid = getpid();
	for (long i = 0; i < n; i++) {
		long fd = rw_dyn(SYS_openat, AT_FDCWD, (long)"/etc/hostname", O_RDONLY, 0, 0, 0);
		if (fd < 0)
			FAIL("round %ld: openat %ld\n", i, fd);
		long r = rw_dyn(SYS_read, fd, (long)buf, sizeof buf - 1, 0, 0, 0);
		if (r <= 0)
			FAIL("round %ld: read %ld\n", i, r);
		buf[r] = 0;
		long p = rw_dyn(SYS_pread64, fd, (long)name, sizeof name - 1, 1, 0, 0);
		if (p != r - 1 || memcmp(name, buf + 1, p) != 0)
			FAIL("round %ld: pread at 1 gave %ld\n", i, p);
		if (rw_dyn(SYS_close, fd, 0, 0, 0, 0, 0) != 0 || rw_dyn(SYS_close, fd, 0, 0, 0, 0, 0) != -EBADF)
			FAIL("round %ld: close, then close again not EBADF\n", i);
		long d = rw_dyn(SYS_openat, AT_FDCWD, (long)"/etc", O_RDONLY | O_DIRECTORY, 0, 0, 0);
		if (d < 0)
			FAIL("round %ld: openat /etc %ld\n", i, d);
		long e = rw_dyn(SYS_read, d, (long)buf, sizeof buf, 0, 0, 0);
		char dents[4096];
		long g = rw_dyn(SYS_getdents64, d, (long)dents, sizeof dents, 0, 0, 0);
		rw_dyn(SYS_close, d, 0, 0, 0, 0, 0);
		if (e != -EISDIR || g <= 0)
			FAIL("round %ld: a directory's read %ld (want %d), getdents64 %ld\n", i, e, -EISDIR, g);
		long x = rw_dyn(SYS_openat, AT_FDCWD, (long)"/../../../../etc/hostname", O_RDONLY, 0, 0, 0);
		if (x < 0)
			FAIL("round %ld: escape openat %ld\n", i, x);
		r = rw_dyn(SYS_read, x, (long)name, sizeof name - 1, 0, 0, 0);
		rw_dyn(SYS_close, x, 0, 0, 0, 0, 0);
		if (r <= 0)
			FAIL("round %ld: escape read %ld\n", i, r);
		name[r] = 0;
		if (strcmp(name, buf) != 0)
			FAIL("round %ld: /../../etc/hostname is %s, /etc/hostname %s", i, name, buf);
		if (rw_dyn(SYS_kill, pid, SIGUSR1, 0, 0, 0, 0) != 0)
			FAIL("round %ld: kill\n", i);
	}
	printf("calls ok %ld, %s", n, buf);
	printf("calls: %ld signals handled, %ld wrong in the handler\n", handled, handler_bad);
	printf("calls: site %s\n", state(rw_dyn_lead));
	return handled != n || handler_bad != 0;
}

static int mode_regs(long n)
{
	/* uname(0x5555...): EFAULT, from kbox; sched_yield: 0, from the kernel. */
	static const long nrs[] = {SYS_uname, SYS_sched_yield};
	static const char *what[] = {"uname", "sched_yield"};
	static const long rets[] = {-EFAULT, 0};
	for (long i = 0; i < n; i++)
		for (int k = 0; k < 2; k++) {
			rw_dynregs(nrs[k]);
			if (rw_regs_bad(what[k], i, 0x3333333333333333)) /* %r10: the move from %rdx */
				return 1;
			if ((regs_out[13] & 0x401) != 0x401) {
				printf("regs: %s call %ld: flags %#llx, CF or DF lost\n", what[k], i, (unsigned long long)regs_out[13]);
				return 1;
			}
			if ((long)regs_out[14] != rets[k]) {
				printf("regs: %s call %ld: %ld, want %ld\n", what[k], i, (long)regs_out[14], rets[k]);
				return 1;
			}
		}
	printf("regs ok %ld, site %s\n", n, state(rw_dynregs_lead));
	return 0;
}

/* musl's cancellable syscall entry (linked with pthread_cancel):
 * __cp_begin ... syscall, __cp_end after it; the lead, `mov
 * %r11,8(%rsp)`, is the 5 bytes before the syscall. */
extern const unsigned char __cp_end[] __attribute__((weak));

static int pipefd[2];
static void *blocked_reader(void *arg)
{
	char c;
	(void)arg;
	read(pipefd[0], &c, 1); /* a cancellation point: never returns */
	return NULL;
}

static int mode_cancel(void)
{
	if (__cp_end == NULL) {
		printf("cancel: not musl (no __cp_end)\n");
		return 1;
	}
	alarm(10);
	/* Cancellable calls at musl's one site: it traps, and is patched. */
	for (int i = 0; i < 100; i++) {
		int fd = open("/etc/hostname", O_RDONLY);
		if (fd < 0 || close(fd) != 0) {
			printf("cancel: open: %s\n", strerror(errno));
			return 1;
		}
	}
	if (pipe(pipefd) != 0)
		return 1;
	pthread_t th;
	if (pthread_create(&th, NULL, blocked_reader, NULL) != 0)
		return 1;
	usleep(200000);
	pthread_cancel(th);
	void *res;
	pthread_join(th, &res);
	printf("cancel: joined, %s\n", res == PTHREAD_CANCELED ? "canceled" : "returned");
	printf("cancel: site %s\n", state((const unsigned char *)((uintptr_t)__cp_end - 7)));
	return res != PTHREAD_CANCELED;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rwdyn MODE [N]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "calls"))
		return mode_calls(n_arg(argc, argv, 2, 20));
	if (!strcmp(argv[1], "regs"))
		return mode_regs(n_arg(argc, argv, 2, 20));
	if (!strcmp(argv[1], "cancel"))
		return mode_cancel();
	fprintf(stderr, "rwdyn: unknown mode %s\n", argv[1]);
	return 2;
}
