/*
 * filter_floor: what a seccomp filter costs a system call that it lets
 * run natively, measured with no kbox at all (docs/benchmarks.md,
 * "Calls that run natively"). One op is lseek(fd, 0, SEEK_SET) plus a
 * 64-byte read, as tests/guest/bench's lseek_read row.
 *
 *   filter_floor MODE N FILE
 *     native    the ops on FILE, no filter
 *     memfd     the ops on a memfd holding FILE's bytes, no filter: what
 *               a guest reads under kbox is such a copy (a shadow)
 *     allow     memfd, under a filter of one instruction that allows
 *               everything: the kernel's action cache then skips the
 *               filter for every call
 *     fdonly    memfd, under the least filter that can tell a host fd
 *               from a virtual one: args[0] below 1024 runs (the
 *               action cache cannot skip a filter that reads arguments):
 *               the floor of running a filter at all
 *     kbox=FILE memfd, under kbox's own filter: FILE holds its struct
 *               sock_filter array (BenchmarkRewrite writes the seccomp
 *               tier's, tierpolicy.Seccomp)
 *     MODE+thread  MODE with a second thread of the process alive (it
 *               waits): the fd table is shared, so each call takes a
 *               reference to its file and lseek and read take the
 *               description's position lock, as every call of a guest
 *               does in an in-process tier, which shares kbox's threads
 *               and fd table (it ends when the loop is done: the
 *               filter of kbox's seccomp tier refuses exit_group)
 *
 * Prints "MODE ns_per_op".
 *
 *   cc -O2 -pthread -o /tmp/filter_floor scripts/filter_floor.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "filter_floor: x86_64 and arm64 only"
#endif

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void install(struct sock_filter *f, unsigned short len)
{
	struct sock_fprog prog = { .len = len, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		die("no_new_privs");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
		die("seccomp");
}

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

static void kbox_filter(const char *path)
{
	static struct sock_filter f[4096];
	FILE *fp = fopen(path, "rb");
	size_t n;

	if (fp == NULL)
		die(path);
	n = fread(f, sizeof(f[0]), sizeof(f) / sizeof(f[0]), fp);
	fclose(fp);
	if (n == 0)
		die("empty filter");
	install(f, (unsigned short)n);
}

/* idle waits until main closes the pipe's other end: under kbox's filter
 * exit_group is not allowed, so each thread must end by itself. */
static int quit[2];

static void *idle(void *arg)
{
	char c;
	(void)arg;
	while (read(quit[0], &c, 1) < 0)
		;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: filter_floor native|memfd|allow|fdonly|kbox=FILTER[+thread] N FILE\n");
		return 2;
	}
	char mode[4096];
	snprintf(mode, sizeof mode, "%s", argv[1]);
	char *suffix = strstr(mode, "+thread");
	if (suffix != NULL && suffix[7] != 0)
		suffix = NULL;
	if (suffix != NULL) {
		pthread_t t;
		*suffix = 0;
		if (pipe(quit) || pthread_create(&t, NULL, idle, NULL))
			die("pthread_create");
	}
	unsigned long n = strtoul(argv[2], NULL, 10);
	int fd = open(argv[3], O_RDONLY);
	if (fd < 0)
		die(argv[3]);
	char buf[65536];
	if (strcmp(mode, "native") != 0) {
		ssize_t got = read(fd, buf, sizeof(buf));
		if (got < 0)
			die("read");
		int m = memfd_create("filter_floor", MFD_CLOEXEC);
		if (m < 0 || write(m, buf, got) != got)
			die("memfd");
		close(fd);
		fd = m;
	}
	if (strcmp(mode, "allow") == 0) {
		struct sock_filter f[] = { RET(SECCOMP_RET_ALLOW) };
		install(f, 1);
	} else if (strcmp(mode, "fdonly") == 0) {
		struct sock_filter f[] = {
			LD(offsetof(struct seccomp_data, args[0])),
			BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 1024, 1, 0),
			RET(SECCOMP_RET_ALLOW),
			RET(SECCOMP_RET_ERRNO | 1),
		};
		install(f, 4);
	} else if (strncmp(mode, "kbox=", 5) == 0) {
		kbox_filter(mode + 5);
	} else if (strcmp(mode, "native") != 0 && strcmp(mode, "memfd") != 0) {
		fprintf(stderr, "filter_floor: unknown mode %s\n", mode);
		return 2;
	}
	struct timespec t0, t1;
	for (unsigned long i = 0; i < n / 10 + n; i++) {
		if (i == n / 10)
			clock_gettime(CLOCK_MONOTONIC, &t0);
		if (lseek(fd, 0, SEEK_SET) != 0 || read(fd, buf, 64) < 0)
			die("lseek/read");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("%s %.1f\n", argv[1], ns / n);
	fflush(stdout);
	if (suffix != NULL)
		close(quit[1]);
	return 0;
}
