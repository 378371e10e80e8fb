/*
 * Guest start-up, run as a constructor before the Go runtime exists, in the
 * child kbox re-executes for a guest (KBOX_GUEST_INIT set). Doing it here
 * means no Go runtime thread can make a notified syscall before the
 * supervisor holds the listener.
 *
 * Protocol on fd 3 (a socketpair end): the parent sends the filter length
 * (u32, in instructions) and the instructions; the child installs the filter
 * and sends the listener fd back with SCM_RIGHTS; the parent answers one byte
 * once it listens; the child execs the guest path, which the supervisor
 * serves like any guest execve.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

extern char **environ;

static char guest_path[4096];

static void die(const char *what)
{
	fprintf(stderr, "kbox: guest start-up: %s: %s\n", what, strerror(errno));
	_exit(125);
}

static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void drop_env(const char *name)
{
	size_t len = strlen(name);
	char **r, **w;
	for (r = w = environ; *r; r++)
		if (!(strncmp(*r, name, len) == 0 && (*r)[len] == '='))
			*w++ = *r;
	*w = NULL;
}

__attribute__((constructor(101))) static void kbox_guest_init(int argc, char **argv)
{
	const char *init = getenv("KBOX_GUEST_INIT");
	const char *path = getenv("KBOX_GUEST_EXEC");
	const char *nofile = getenv("KBOX_GUEST_NOFILE");
	const int sock = 3;
	unsigned int len;
	struct sock_filter *insns;
	struct sock_fprog prog;
	struct rlimit rl;
	long listener;
	(void)argc;

	if (init == NULL || strcmp(init, "1") != 0 || path == NULL)
		return;
	if (strlen(path) >= sizeof(guest_path))
		_exit(125);
	strcpy(guest_path, path);
	drop_env("KBOX_GUEST_INIT");
	drop_env("KBOX_GUEST_EXEC");
	drop_env("KBOX_GUEST_NOFILE");

	/* Virtual fds start where the host fd limit ends. */
	if (nofile != NULL && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rlim_t max = (rlim_t)strtoul(nofile, NULL, 10);
		if (rl.rlim_max > max)
			rl.rlim_max = max;
		if (rl.rlim_cur > rl.rlim_max)
			rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			die("setrlimit");
	}

	if (read_full(sock, &len, sizeof(len)) != 0 || len == 0 || len > 4096)
		die("read filter length");
	insns = calloc(len, sizeof(*insns));
	if (insns == NULL || read_full(sock, insns, len * sizeof(*insns)) != 0)
		die("read filter");
	prog.len = (unsigned short)len;
	prog.filter = insns;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		die("no_new_privs");
	listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			   SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
	if (listener < 0 && errno == EINVAL)
		listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				   SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (listener < 0)
		die("install seccomp filter");

	{
		char byte = 'L';
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		int lfd = (int)listener;

		memset(cbuf, 0, sizeof(cbuf));
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &lfd, sizeof(int));
		if (sendmsg(sock, &msg, 0) != 1)
			die("send listener");
		close(lfd);
		if (read_full(sock, &byte, 1) != 0)
			die("wait for supervisor");
	}
	close(sock);
	execve(guest_path, argv, environ);
	fprintf(stderr, "kbox: %s: %s\n", guest_path, strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}
