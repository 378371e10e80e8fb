/* trapguard: what the in-process trap tier must keep from the guest, and
 * the process features it emulates (tests/trap_test.go).
 *
 *   trapguard fds     close, dup2 and close_range over fds at and above
 *                     the guest's RLIMIT_NOFILE (kbox's, in the trap tier)
 *   trapguard mem     munmap, MAP_FIXED, mprotect, madvise and mremap of
 *                     kbox's own memory (found in /proc/self/maps)
 *   trapguard segv    a write through a bad pointer
 *   trapguard signal  handlers, masks and pending signals
 *   trapguard thread  pthreads that each do file work
 *   trapguard wait    a SIGTERM handler, then pause() until a signal
 *                     sent from outside (to kbox's pid) arrives
 *
 * Each mode ends by reading /etc/hostname, which needs kbox intact. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "check.h"

/* ename is "ok" for a call that did not return -1, else errno's name. */
static const char *ename(long r) { return r != -1 ? "ok" : errname(errno); }

static void hostname(const char *who)
{
	char buf[128];
	int fd = open("/etc/hostname", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (n < 0) {
		printf("%s: /etc/hostname: %s\n", who, strerror(errno));
		exit(1);
	}
	close(fd);
	buf[n] = 0;
	printf("%s: hostname %s", who, buf);
}

static int fds(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	int g = (int)rl.rlim_cur, bad = 0;
	for (int fd = g; fd < g + 200; fd++)
		if (close(fd) != -1 || errno != EBADF)
			bad++;
	printf("close above the limit: %d not EBADF\n", bad);
	printf("dup2 above the limit: %s\n", ename(dup2(1, g + 3)));
	printf("dup3 above the limit: %s\n", ename(dup3(1, g + 7, O_CLOEXEC)));
	printf("dup2 below the limit: %s\n", ename(dup2(1, g - 1) == g - 1 ? 0 : -1));
	printf("close_range: %s\n", ename(syscall(SYS_close_range, 3, ~0U, 0)));
	printf("fcntl F_GETFD of a closed fd: %s\n", ename(fcntl(g - 1, F_GETFD)));
	int d = dup(2);
	printf("dup: %s\n", d > 2 ? "a new fd" : ename(d));
	fflush(stdout);
	hostname("fds");
	return 0;
}

/* kbox's memory as the guest sees it: the text and data of the binary
 * whose name is kbox (none natively). */
static int kboxmap(unsigned long *text, unsigned long *data)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	*text = *data = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perm[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) != 3)
			continue;
		char *name = strrchr(line, '/');
		if (name == NULL || strcmp(name, "/kbox\n") != 0)
			continue;
		if (perm[2] == 'x' && *text == 0)
			*text = lo;
		if (perm[1] == 'w' && *data == 0)
			*data = lo;
	}
	if (f)
		fclose(f);
	return *text != 0 && *data != 0;
}

static int mem(void)
{
	unsigned long text, data;
	if (!kboxmap(&text, &data)) {
		puts("no kbox mapping");
	} else {
		void *t = (void *)text, *d = (void *)data;
		printf("munmap kbox text: %s\n", ename(munmap(t, 4096)));
		printf("mmap MAP_FIXED over kbox data: %s\n",
		       ename(mmap(d, 4096, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED ? -1 : 0));
		printf("mprotect kbox data: %s\n", ename(mprotect(d, 4096, PROT_NONE)));
		printf("madvise DONTNEED kbox data: %s\n", ename(madvise(d, 4096, MADV_DONTNEED)));
		printf("mremap kbox text: %s\n", ename(mremap(t, 4096, 8192, MREMAP_MAYMOVE) == MAP_FAILED ? -1 : 0));
	}
	/* The guest's own memory stays its own to change. */
	char *p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p[0] = 1;
	printf("own mmap MAP_FIXED: %s\n", ename(mmap(p + 4096, 4096, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED ? -1 : 0));
	printf("own mprotect: %s\n", ename(mprotect(p, 4096, PROT_READ)));
	printf("own munmap: %s\n", ename(munmap(p, 3 * 4096)));
	void *big = malloc(64 << 20); /* an mmap'd chunk, freed with munmap */
	memset(big, 7, 64 << 20);
	free(big);
	fflush(stdout);
	hostname("mem");
	return 0;
}

static volatile sig_atomic_t got;
static void on_usr(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	got = sig * 100 + (si->si_code == SI_TKILL || si->si_code == SI_USER);
}

static int sig(void)
{
	struct sigaction sa = {0};
	sa.sa_sigaction = on_usr;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR1, &sa, NULL);
	raise(SIGUSR1);
	printf("raise SIGUSR1: handler saw %d\n", got);
	sigset_t s, p;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	sigaction(SIGUSR2, &sa, NULL);
	sigprocmask(SIG_BLOCK, &s, NULL);
	got = 0;
	kill(getpid(), SIGUSR2);
	sigpending(&p);
	printf("blocked SIGUSR2: pending %d, handler saw %d\n", sigismember(&p, SIGUSR2), got);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	printf("unblocked SIGUSR2: handler saw %d\n", got);
	signal(SIGUSR1, SIG_IGN);
	raise(SIGUSR1);
	puts("ignored SIGUSR1: still here");
	fflush(stdout);
	hostname("signal");
	signal(SIGTERM, SIG_DFL);
	raise(SIGTERM);
	puts("not reached");
	return 0;
}

static void *worker(void *arg)
{
	long i = (long)arg, sum = 0;
	for (int k = 0; k < 50; k++) {
		char buf[64];
		int fd = open("/etc/hostname", O_RDONLY);
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		sum += n;
	}
	return (void *)(sum + i * 0);
}

static int thread(void)
{
	pthread_t th[4];
	long total = 0;
	for (long i = 0; i < 4; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0) {
			puts("pthread_create failed");
			return 1;
		}
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(th[i], &r);
		total += (long)r;
	}
	printf("threads: 4 joined, %ld bytes read\n", total);
	fflush(stdout);
	hostname("thread");
	return 0;
}

static volatile sig_atomic_t term;
static void on_term(int sig) { term = sig; }

static int wait_signal(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL); /* no SA_RESTART: pause returns EINTR */
	puts("ready");
	fflush(stdout);
	int r = pause();
	printf("pause: %s, handler saw %d\n", r == -1 && errno == EINTR ? "EINTR" : "?", term);
	fflush(stdout);
	hostname("wait");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *m = argc > 1 ? argv[1] : "";
	if (strcmp(m, "fds") == 0)
		return fds();
	if (strcmp(m, "mem") == 0)
		return mem();
	if (strcmp(m, "segv") == 0) {
		puts("segv: writing through a bad pointer");
		fflush(stdout);
		*(volatile int *)16 = 1;
		puts("not reached");
		return 0;
	}
	if (strcmp(m, "signal") == 0)
		return sig();
	if (strcmp(m, "thread") == 0)
		return thread();
	if (strcmp(m, "wait") == 0)
		return wait_signal();
	fprintf(stderr, "usage: trapguard fds|mem|segv|signal|thread|wait\n");
	return 2;
}
