/* rwsites: syscall sites of the shape the rewrite tier patches
 * (`mov $nr,%eax; syscall`), written in assembly so that the shape is
 * certain, and checks of what the guest sees when they are patched.
 *
 *   rwsites inline N      getpid at an inline site N times == getpid()
 *   rwsites regs N        registers and xmm0 survive a patched getuid
 *   rwsites threads T N   T threads call one site N times each
 *   rwsites signals N     kill(self, SIGUSR1) at a site: N handler runs
 *   rwsites wx            mmap/mprotect with PROT_WRITE|PROT_EXEC
 *   rwsites forget N      mprotect of patched code restores it
 *   rwsites exec N        a site patched, exec of itself N times
 *   rwsites badptr N      bad pointers at a patched site: EFAULT
 *   rwsites escape N      open of /../../etc/hostname at a patched site
 *   rwsites moves N       sites with moves between mov and syscall
 *                         (extended sites: the moves go into the stub)
 *   rwsites wait N S      getuid at a site N times, then S seconds asleep
 *                         (the observatory's snapshot meanwhile)
 *
 * "patched" lines read the site's bytes: FF 24 25 is the rewrite tier's
 * jump; natively (and in the other tiers) they stay B8 ... 0F 05. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rwregs.h"

/* Each site is a function of its own: 16-byte aligned, `mov $nr,%eax;
 * syscall; ret`. */
#define SITE(name, nr)                        \
	__asm__(".text\n"                     \
		".p2align 4\n"                \
		".globl " #name "\n"          \
		".type " #name ",@function\n" \
		#name ":\n"                   \
		"	mov $" #nr ", %eax\n"  \
		"	syscall\n"             \
		"	ret\n");

SITE(rw_getpid, 39)
SITE(rw_getuid, 102)
SITE(rw_kill, 62)
SITE(rw_uname, 63)
SITE(rw_stat, 4)
SITE(rw_open, 2)

/* Extended sites: moves between the mov and the syscall, as compilers
 * schedule them. rw_getcwd3(buf, unused, size) is getcwd(buf, size):
 * %rdx (size) moved to %rsi. rw_openat_rdonly(path) is openat(AT_FDCWD,
 * path, O_RDONLY): %rdi moved to %rsi before %rdi is set (the order of
 * the moves matters), then two immediates. Each is preceded by 64
 * one-byte NOPs, so that every back sweep of the site finder (decodings
 * started 16 ... 1024 bytes before the mov) is in step when it reaches
 * it, whatever the code before. */
__asm__(".text\n"
	".p2align 4\n"
	".fill 64, 1, 0x90\n"
	".globl rw_getcwd3\n"
	".type rw_getcwd3,@function\n"
	"rw_getcwd3:\n"
	"	mov $79, %eax\n"
	"	mov %rdx, %rsi\n"
	"	syscall\n"
	"	ret\n"
	".fill 64, 1, 0x90\n"
	".globl rw_openat_rdonly\n"
	".type rw_openat_rdonly,@function\n"
	"rw_openat_rdonly:\n"
	"	mov $257, %eax\n"
	"	mov %rdi, %rsi\n"
	"	mov $-100, %rdi\n"
	"	mov $0, %edx\n"
	"	syscall\n"
	"	ret\n");
long rw_getcwd3(char *buf, long unused, long size);
long rw_openat_rdonly(const char *path);

long rw_getpid(void);
long rw_getuid(void);
long rw_kill(long pid, long sig);
long rw_uname(void *buf);
long rw_stat(const char *path, void *st);
long rw_open(const char *path, long flags, long mode);

static const unsigned char *site_of(void *fn) { return fn; }

static const char *state(void *fn)
{
	const unsigned char *s = site_of(fn);
	if (s[0] == 0xFF && s[1] == 0x24 && s[2] == 0x25)
		return "patched";
	if (s[0] == 0xB8 && ((s[5] == 0x0F && s[6] == 0x05) || s[5] == 0x48)) /* the syscall, or a move */
		return "original";
	return "other";
}

/* rw_regs: magic values in every register the kernel preserves across a
 * syscall (all but rax, rcx, r11) and in xmm0, a patched getuid, then
 * everything stored to regs_out (rwregs.h). */
__asm__(".text\n"
	".globl rw_regs\n"
	".type rw_regs,@function\n"
	"rw_regs:\n"
	RW_REGS_ENTER
	"	mov $0x8888888888888888, %r10\n"
	"	std\n" /* the direction flag too (rflags survive) */
	".p2align 4\n"
	".globl rw_regs_site\n"
	"rw_regs_site:\n"
	"	mov $102, %eax\n"
	"	syscall\n"
	RW_REGS_LEAVE);
void rw_regs(void);
extern char rw_regs_site[];

static long n_arg(int argc, char **argv, int i, long def)
{
	return argc > i ? atol(argv[i]) : def;
}

static int mode_inline(long n)
{
	long want = getpid();
	for (long i = 0; i < n; i++)
		if (rw_getpid() != want) {
			printf("inline: getpid %ld, want %ld\n", rw_getpid(), want);
			return 1;
		}
	printf("inline ok %ld, site %s\n", n, state(rw_getpid));
	return 0;
}

static int mode_regs(long n)
{
	long uid = getuid();
	for (long i = 0; i < n; i++) {
		rw_regs();
		if (rw_regs_bad("getuid", i, 0x8888888888888888))
			return 1;
		if (!(regs_out[13] & 0x400)) {
			printf("regs: call %ld: the direction flag was lost\n", i);
			return 1;
		}
		if ((long)regs_out[14] != uid) {
			printf("regs: call %ld: getuid %ld, want %ld\n", i, (long)regs_out[14], uid);
			return 1;
		}
	}
	const unsigned char *s = (const unsigned char *)rw_regs_site;
	printf("regs ok %ld, site %s\n", n, s[0] == 0xFF ? "patched" : s[0] == 0xB8 ? "original" : "other");
	return 0;
}

static long per_thread;
static long want_uid;
static void *hammer(void *arg)
{
	long bad = 0;
	for (long i = 0; i < per_thread; i++)
		if (rw_getuid() != want_uid)
			bad++;
	return (void *)bad;
}

static int mode_threads(long t, long n)
{
	pthread_t th[64];
	if (t > 64)
		t = 64;
	per_thread = n;
	want_uid = getuid();
	for (long i = 0; i < t; i++)
		if (pthread_create(&th[i], NULL, hammer, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	long bad = 0;
	for (long i = 0; i < t; i++) {
		void *r;
		pthread_join(th[i], &r);
		bad += (long)r;
	}
	printf("threads: %ld threads x %ld calls, %ld wrong, site %s\n", t, n, bad, state(rw_getuid));
	return bad != 0;
}

static volatile long handled;
static void on_usr1(int sig) { handled++; }

static int mode_signals(long n)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	long pid = getpid();
	for (long i = 0; i < n; i++)
		if (rw_kill(pid, SIGUSR1) != 0) {
			printf("signals: kill failed\n");
			return 1;
		}
	printf("signals: %ld sent, %ld handled, site %s\n", n, handled, state(rw_kill));
	return handled != n;
}

static int mode_wx(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int e1 = p == MAP_FAILED ? errno : 0;
	void *q = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int e2 = mprotect(q, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) != 0 ? errno : 0;
	int e3 = mprotect(q, 4096, PROT_READ | PROT_EXEC) != 0 ? errno : 0;
	printf("wx: mmap %s, mprotect %s, then r-x %s\n", e1 ? strerror(e1) : "allowed",
	       e2 ? strerror(e2) : "allowed", e3 ? strerror(e3) : "allowed");
	return 0;
}

static int mode_forget(long n)
{
	long uid = getuid();
	for (long i = 0; i < n; i++)
		if (rw_getuid() != uid)
			return 1;
	printf("forget: before %s", state(rw_getuid));
	uintptr_t page = (uintptr_t)site_of(rw_getuid) & ~(uintptr_t)4095;
	if (mprotect((void *)page, 4096, PROT_READ | PROT_EXEC) != 0) {
		perror("mprotect");
		return 1;
	}
	printf(", after mprotect %s", state(rw_getuid));
	for (long i = 0; i < n; i++)
		if (rw_getuid() != uid)
			return 1;
	printf(", called again %s\n", state(rw_getuid));
	return 0;
}

static int mode_exec(char *self, long n)
{
	long uid = getuid();
	for (int i = 0; i < 100; i++) /* more than the traps before a patch */
		if (rw_getuid() != uid)
			return 1;
	printf("exec %ld: site %s\n", n, state(rw_getuid));
	fflush(stdout);
	if (n <= 0)
		return 0;
	char arg[32];
	snprintf(arg, sizeof arg, "%ld", n - 1);
	execl(self, self, "exec", arg, (char *)NULL);
	perror("execl");
	return 1;
}

static int mode_badptr(long n)
{
	char st[256];
	long bad = 0;
	for (long i = 0; i < n; i++) {
		if (rw_uname((void *)1) != -EFAULT)
			bad++;
		if (rw_stat((const char *)0xffff800000000000UL, st) != -EFAULT)
			bad++;
		if (rw_stat("/etc/hostname", (void *)8) != -EFAULT)
			bad++;
	}
	printf("badptr: %ld calls, %ld not EFAULT, sites %s %s\n", 3 * n, bad, state(rw_uname), state(rw_stat));
	return bad != 0;
}

static int mode_escape(long n)
{
	char buf[128];
	for (long i = 0; i < n; i++) {
		long fd = rw_open("/../../../../etc/hostname", O_RDONLY, 0);
		if (fd < 0) {
			printf("escape: open: %ld\n", fd);
			return 1;
		}
		ssize_t r = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (r < 0)
			return 1;
		buf[r] = 0;
	}
	printf("escape: %s", buf);
	printf("escape: site %s\n", state(rw_open));
	return 0;
}

static int mode_moves(long n)
{
	char buf[128], cwd[256];
	if (chdir("/etc") != 0) {
		perror("chdir");
		return 1;
	}
	for (long i = 0; i < n; i++) {
		long w = rw_getcwd3(cwd, 0, sizeof cwd);
		if (w != 5 || strcmp(cwd, "/etc") != 0) {
			printf("moves: call %ld: getcwd gave %ld\n", i, w);
			return 1;
		}
		long fd = rw_openat_rdonly("hostname");
		if (fd < 0) {
			printf("moves: call %ld: openat gave %ld\n", i, fd);
			return 1;
		}
		ssize_t r = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (r <= 0) {
			printf("moves: call %ld: read gave %ld\n", i, (long)r);
			return 1;
		}
		buf[r] = 0;
	}
	printf("moves ok %ld, %s", n, buf);
	printf("moves: sites %s %s\n", state(rw_getcwd3), state(rw_openat_rdonly));
	return 0;
}

static int mode_wait(long n, long secs)
{
	long uid = getuid();
	for (long i = 0; i < n; i++)
		if (rw_getuid() != uid)
			return 1;
	printf("wait: %ld calls, site %s\n", n, state(rw_getuid));
	fflush(stdout);
	sleep(secs);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rwsites MODE [ARGS]\n");
		return 2;
	}
	const char *m = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "inline"))
		return mode_inline(n_arg(argc, argv, 2, 100));
	if (!strcmp(m, "regs"))
		return mode_regs(n_arg(argc, argv, 2, 100));
	if (!strcmp(m, "threads"))
		return mode_threads(n_arg(argc, argv, 2, 8), n_arg(argc, argv, 3, 10000));
	if (!strcmp(m, "signals"))
		return mode_signals(n_arg(argc, argv, 2, 100));
	if (!strcmp(m, "wx"))
		return mode_wx();
	if (!strcmp(m, "forget"))
		return mode_forget(n_arg(argc, argv, 2, 10));
	if (!strcmp(m, "exec"))
		return mode_exec(argv[0], n_arg(argc, argv, 2, 3));
	if (!strcmp(m, "badptr"))
		return mode_badptr(n_arg(argc, argv, 2, 10));
	if (!strcmp(m, "moves"))
		return mode_moves(n_arg(argc, argv, 2, 10));
	if (!strcmp(m, "wait"))
		return mode_wait(n_arg(argc, argv, 2, 10), n_arg(argc, argv, 3, 5));
	if (!strcmp(m, "escape"))
		return mode_escape(n_arg(argc, argv, 2, 10));
	fprintf(stderr, "rwsites: unknown mode %s\n", m);
	return 2;
}
