/*
 * lkl_net_floor: the floor of LKL's own TCP for BenchmarkNet's rows, with
 * no kbox, no device, no user-mode stack and no host pair. It boots the
 * liblkl kbox links (kbox's --net command line: mem=128M), brings up LKL's
 * loopback, and runs the net_conns and net_rtt workloads of
 * tests/guest/inet.c between two threads that call lkl_syscall directly:
 * an echo server thread and a client. It runs the very same code
 * natively on the host's loopback first, so the ratios are measured in
 * the same minutes.
 *
 *   conns: socket, connect, write 1 byte, read it back, close (the server:
 *          accept, read, write, close), N times in a row;
 *   rtt:   one connection, 64 bytes written and read back, N times.
 *
 * Both ends are LKL's here, so LKL does the TCP work of both; a kbox
 * connection has one LKL end and crosses the device, gVisor's stack and
 * the host's loopback besides. What this shows is what LKL alone costs
 * per connection and per round trip on this machine: the part of
 * kbox's figures no change in kbox can remove.
 *
 * Build and run (docs/benchmarks.md, "Networking"):
 *   gcc -O2 -I/opt/lkl/include scripts/lkl_net_floor.c -L/opt/lkl/lib \
 *       -l:liblkl.a -lpthread -lrt -o /tmp/lkl_net_floor
 *   /tmp/lkl_net_floor [CONNS [ROUNDS]]
 * It prints one line per workload and side: "lkl conns 1234.5 /s" etc.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lkl_floor_boot.h"

static const char *cmdline = "mem=128M loglevel=0 stack_depot_disable=on pty.legacy_count=0";

/* One table of calls per side: LKL's through lkl_syscall, or the host's. */
struct ops {
	const char *name;
	long (*call)(long nr, long a, long b, long c, long d, long e);
};

static long lkl_call(long nr, long a, long b, long c, long d, long e)
{
	long p[6] = {a, b, c, d, e, 0};
	return lkl_syscall(nr, p);
}

static long host_call(long nr, long a, long b, long c, long d, long e)
{
	long r = syscall(nr, a, b, c, d, e);
	return r < 0 ? -errno : r;
}

/* The syscall numbers of one side: LKL's are asm-generic's. */
struct nrs {
	long socket, bind, listen, accept4, connect, read, write, close, setsockopt, getsockname;
};

static const struct nrs lkl_nrs = {
	__lkl__NR_socket, __lkl__NR_bind, __lkl__NR_listen, __lkl__NR_accept4,
	__lkl__NR_connect, __lkl__NR_read, __lkl__NR_write, __lkl__NR_close,
	__lkl__NR_setsockopt, __lkl__NR_getsockname,
};

static const struct nrs host_nrs = {
	SYS_socket, SYS_bind, SYS_listen, SYS_accept4, SYS_connect, SYS_read,
	SYS_write, SYS_close, SYS_setsockopt, SYS_getsockname,
};

struct side {
	const struct ops *ops;
	const struct nrs *nr;
	int listener;
	volatile int oneshot; /* conns: close each connection after its byte */
};

static long X(const struct side *s, long nr, long a, long b, long c, long d, long e)
{
	return s->ops->call(nr, a, b, c, d, e);
}

static void die(const char *what, long err)
{
	fprintf(stderr, "lkl_net_floor: %s: %s\n", what, strerror((int)-err));
	exit(1);
}

static int full(const struct side *s, long nr, int fd, char *buf, int n)
{
	int done = 0;
	while (done < n) {
		long r = X(s, nr, fd, (long)(buf + done), n - done, 0, 0);
		if (r <= 0)
			return -1;
		done += (int)r;
	}
	return 0;
}

static void nodelay(const struct side *s, int fd)
{
	int one = 1;
	X(s, s->nr->setsockopt, fd, IPPROTO_TCP, TCP_NODELAY, (long)&one, sizeof one);
}

/* server echoes each connection it accepts until EOF. */
static void *server(void *arg)
{
	const struct side *s = arg;
	char buf[64];
	for (;;) {
		long c = X(s, s->nr->accept4, s->listener, 0, 0, 0, 0);
		if (c < 0)
			return NULL;
		nodelay(s, (int)c);
		long r;
		while ((r = X(s, s->nr->read, c, (long)buf, sizeof buf, 0, 0)) > 0) {
			if (full(s, s->nr->write, (int)c, buf, (int)r) < 0)
				break;
			/* A one-byte connection is done: one thread serving
			 * connections in turn must not wait for the client's FIN
			 * before it accepts the next (the Go server of
			 * BenchmarkNet has a goroutine for each). */
			if (s->oneshot)
				break;
		}
		X(s, s->nr->close, c, 0, 0, 0, 0);
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int dial(const struct side *s, const struct sockaddr_in *a)
{
	long fd = X(s, s->nr->socket, AF_INET, SOCK_STREAM, 0, 0, 0);
	if (fd < 0)
		die("socket", fd);
	nodelay(s, (int)fd);
	long r = X(s, s->nr->connect, fd, (long)a, sizeof *a, 0, 0);
	if (r < 0)
		die("connect", r);
	return (int)fd;
}

static void run(const struct ops *ops, const struct nrs *nr, int conns, int rounds)
{
	/* The server thread outlives this call (it stays in accept). */
	struct side *sp = calloc(1, sizeof(*sp));
	*sp = (struct side){ops, nr, -1, 1};
#define s (*sp)
	struct sockaddr_in a = {.sin_family = AF_INET}; /* port 0: the kernel's choice */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	long l = X(&s, nr->socket, AF_INET, SOCK_STREAM, 0, 0, 0);
	if (l < 0)
		die("socket", l);
	int one = 1;
	X(&s, nr->setsockopt, l, SOL_SOCKET, SO_REUSEADDR, (long)&one, sizeof one);
	long r = X(&s, nr->bind, l, (long)&a, sizeof a, 0, 0);
	if (r < 0)
		die("bind", r);
	if ((r = X(&s, nr->listen, l, 128, 0, 0, 0)) < 0)
		die("listen", r);
	int alen = sizeof a;
	if ((r = X(&s, nr->getsockname, l, (long)&a, (long)&alen, 0, 0)) < 0)
		die("getsockname", r);
	s.listener = (int)l;
	pthread_t t;
	pthread_create(&t, NULL, server, &s);

	char buf[64];
	memset(buf, 'x', sizeof buf);
	/* A few connections first: the first call on a thread sets LKL up for it. */
	for (int i = 0; i < 10; i++) {
		int fd = dial(&s, &a);
		full(&s, nr->write, fd, buf, 1);
		full(&s, nr->read, fd, buf, 1);
		X(&s, nr->close, fd, 0, 0, 0, 0);
	}
	double t0 = now();
	for (int i = 0; i < conns; i++) {
		int fd = dial(&s, &a);
		if (full(&s, nr->write, fd, buf, 1) < 0 || full(&s, nr->read, fd, buf, 1) < 0)
			die("echo", -EIO);
		X(&s, nr->close, fd, 0, 0, 0, 0);
	}
	double dt = now() - t0;
	printf("%s conns %.1f /s (%d connections, %.1f us each)\n", ops->name, conns / dt, conns, dt / conns * 1e6);

	s.oneshot = 0;
	/* The server may be in accept for the next connection, or closing the
	 * last one: this connection is served by the loop either way. */
	int fd = dial(&s, &a);
	for (int i = 0; i < 100; i++) {
		full(&s, nr->write, fd, buf, 64);
		full(&s, nr->read, fd, buf, 64);
	}
	t0 = now();
	for (int i = 0; i < rounds; i++) {
		if (full(&s, nr->write, fd, buf, 64) < 0 || full(&s, nr->read, fd, buf, 64) < 0)
			die("rtt", -EIO);
	}
	dt = now() - t0;
	printf("%s rtt %.1f us (%d rounds of 64 bytes)\n", ops->name, dt / rounds * 1e6, rounds);
	X(&s, nr->close, fd, 0, 0, 0, 0);
	fflush(stdout);
#undef s
}

int main(int argc, char **argv)
{
	int conns = argc > 1 ? atoi(argv[1]) : 1000;
	int rounds = argc > 2 ? atoi(argv[2]) : 2000;
	static const struct ops lkl = {"lkl", lkl_call}, host = {"native", host_call};

	/* The host first, before LKL runs: run after LKL's, it printed
	 * nothing into a pipe, and the process ended with status 0 and no
	 * exit_group (its threads left one by one; seen, not explained). */
	run(&host, &host_nrs, conns, rounds);
	int err = floor_boot(cmdline);
	if (err < 0) {
		fprintf(stderr, "lkl_net_floor: boot: %s\n", lkl_strerror(err));
		return 1;
	}
	if ((err = lkl_if_up(1)) < 0) {
		fprintf(stderr, "lkl_net_floor: lo up: %s\n", lkl_strerror(err));
		return 1;
	}
	run(&lkl, &lkl_nrs, conns, rounds);
	fflush(stdout);
	_exit(0); /* not through exit(): LKL's threads are still in it */
}
