/* bench: syscall micro-benchmark for comparing native runs with kbox.
 *
 *   bench ROW ITERATIONS [FILE]
 *
 * ROW: stat | stat_missing | open_close | lseek_read | write | append_shared |
 *      getpid_libc | getpid_inline | unix_send | unix_sendmsg
 * FILE defaults to /etc/hostname. Runs ITERATIONS/10 warm-up operations,
 * then times ITERATIONS operations with CLOCK_MONOTONIC and prints one
 * line "ROW NS_PER_OP".
 *
 * write: 64-byte write()s to /tmp/bench.out, opened once; the file offset
 * is rewound every 1024 writes to keep the file small (adds ~0.1% lseeks).
 * lseek_read: one op = lseek(fd, 0, SEEK_SET) + read of 64 bytes.
 * stat_missing: stat of FILE, which must not exist (every call fails with
 * ENOENT: the observatory keeps every failing call).
 * append_shared: 64-byte O_APPEND write()s to FILE while two other processes
 * hold it open for appending too (a log file several writers share).
 * unix_send, unix_sendmsg: one op = a 64-byte datagram sent on one end of a
 * socketpair (send(2), which is sendto without an address, or sendmsg(2))
 * and received on the other. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;
static const char *file = "/etc/hostname";
static int fd = -1;
static char buf[64];

static inline long getpid_inline(void)
{
#if defined(__x86_64__)
	/* Spelled out as `mov $39,%eax; syscall`, the shape the rewrite
	 * tier patches (a compiler may load %eax elsewhere). */
	long ret;
	__asm__ volatile("mov $39, %%eax\n\tsyscall"
			 : "=a"(ret)
			 :
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_getpid;
	register long x0 __asm__("x0");
	__asm__ volatile("svc #0" : "=r"(x0) : "r"(x8) : "memory");
	return x0;
#else
#error "getpid_inline: unsupported architecture"
#endif
}

static void fail(const char *what)
{
	perror(what);
	exit(1);
}

static void op_stat(unsigned long n)
{
	struct stat st;
	for (unsigned long i = 0; i < n; i++) {
		if (stat(file, &st) != 0)
			fail("stat");
		sink += st.st_size;
	}
}

static void op_stat_missing(unsigned long n)
{
	struct stat st;
	for (unsigned long i = 0; i < n; i++)
		if (stat(file, &st) == 0 || errno != ENOENT)
			fail("stat_missing: want ENOENT");
}

static void op_open_close(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		int f = open(file, O_RDONLY);
		if (f < 0)
			fail("open");
		close(f);
	}
}

static void op_lseek_read(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		if (lseek(fd, 0, SEEK_SET) != 0)
			fail("lseek");
		if (read(fd, buf, sizeof(buf)) < 0)
			fail("read");
	}
}

static void op_write(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		if ((i & 1023) == 1023 && lseek(fd, 0, SEEK_SET) != 0)
			fail("lseek");
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			fail("write");
	}
}

static void op_append_shared(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			fail("append");
}

/* other_writers starts two processes that hold file open for appending
 * until killed. */
static pid_t writers[2];

static void other_writers(void)
{
	for (int i = 0; i < 2; i++) {
		int p[2];
		if (pipe(p) != 0)
			fail("pipe");
		if ((writers[i] = fork()) == 0) {
			int w = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644);
			if (w < 0 || write(w, "other\n", 6) != 6)
				_exit(1);
			close(p[0]);
			close(p[1]); /* ready */
			pause();
			_exit(0);
		}
		close(p[1]);
		char c;
		if (read(p[0], &c, 1) != 0)
			fail("writer");
		close(p[0]);
	}
}

static void op_getpid_libc(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += getpid();
}

static void op_getpid_inline(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += getpid_inline();
}

static int pair[2];

static void op_unix_send(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		if (send(pair[0], buf, sizeof(buf), 0) != sizeof(buf) || recv(pair[1], buf, sizeof(buf), 0) != sizeof(buf))
			fail("send");
	}
}

static void op_unix_sendmsg(unsigned long n)
{
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	for (unsigned long i = 0; i < n; i++) {
		if (sendmsg(pair[0], &m, 0) != sizeof(buf) || recv(pair[1], buf, sizeof(buf), 0) != sizeof(buf))
			fail("sendmsg");
	}
}

static const struct {
	const char *name;
	void (*fn)(unsigned long);
} rows[] = {
	{ "stat", op_stat },
	{ "stat_missing", op_stat_missing },
	{ "open_close", op_open_close },
	{ "lseek_read", op_lseek_read },
	{ "write", op_write },
	{ "append_shared", op_append_shared },
	{ "getpid_libc", op_getpid_libc },
	{ "getpid_inline", op_getpid_inline },
	{ "unix_send", op_unix_send },
	{ "unix_sendmsg", op_unix_sendmsg },
};

static int usage(void)
{
	fprintf(stderr, "usage: bench stat|stat_missing|open_close|lseek_read|write|append_shared|getpid_libc|getpid_inline|unix_send|unix_sendmsg ITERATIONS [FILE]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4)
		return usage();
	void (*fn)(unsigned long) = NULL;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (strcmp(argv[1], rows[i].name) == 0)
			fn = rows[i].fn;
	char *end;
	unsigned long iters = strtoul(argv[2], &end, 10);
	if (!fn || *argv[2] == '\0' || *argv[2] == '-' || *end != '\0' || iters == 0)
		return usage();
	if (argc == 4)
		file = argv[3];

	if ((fn == op_unix_send || fn == op_unix_sendmsg) && socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) != 0)
		fail("socketpair");
	if (fn == op_lseek_read && (fd = open(file, O_RDONLY)) < 0)
		fail(file);
	if (fn == op_write) {
		memset(buf, 'k', sizeof(buf));
		fd = open("/tmp/bench.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			fail("/tmp/bench.out");
	}

	if (fn == op_append_shared) {
		memset(buf, 'a', sizeof(buf));
		buf[sizeof(buf) - 1] = '\n';
		other_writers();
		fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644);
		if (fd < 0)
			fail(file);
	}

	fn(iters / 10);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fn(iters);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	if (fn == op_append_shared)
		for (int i = 0; i < 2; i++) {
			kill(writers[i], SIGKILL);
			waitpid(writers[i], NULL, 0);
		}

	double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	printf("%s %.1f\n", argv[1], ns / (double)iters);
	return 0;
}
