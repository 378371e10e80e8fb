/*
 * The socket binder: a small process, forked by the guest start-up in the
 * guest's namespaces before the seccomp filter exists, that names the
 * guest's AF_UNIX sockets for kbox (dispatch/sys_net_socket.go, docs/tiers.md
 * "Unix sockets").
 *
 * The kernel keeps the address a socket was bound with and shows it to
 * everyone: getsockname, getpeername, accept and recvfrom return it. So
 * that they return the guest's own path, never a host path, the binder
 * chroots into a private directory of kbox's (0700, inside kbox's stage
 * directory) and binds the guest's socket (a copy kbox took with
 * pidfd_getfd) with the guest's very string, absolute or relative to a
 * copy of the guest's working directory. The directories of the path are
 * made for the bind and removed after it; the socket's name is opened
 * O_PATH, unlinked at once, and the O_PATH fd goes to kbox, which connects
 * and sends to the socket through it. Nothing of it stays on the host.
 *
 * Where it cannot chroot (no user namespace, not root), the binder binds
 * the path made relative to the same directory instead: the guest then
 * sees its path without the leading slash.
 *
 * A socket in a bind (-b) is bound in the bind's host directory (kbox
 * hands over a confined fd of it) by its last component, and stays there:
 * that is the point of a bind.
 *
 * The binder also opens /proc/sysvipc files for kbox: their contents are
 * those of the IPC namespace of whoever opens them, and the binder shares
 * the guest's. So are the IPC namespace's limits in /proc/sys/kernel and
 * /proc/sys/fs/mqueue, which it reads and writes for kbox (OP_SYSCTL,
 * those files only; each read or write opens the file in the binder, in
 * the guest's namespace). For the same reason it makes, inspects, changes
 * and removes the guest's System V objects for kbox (OP_IPC: msgget,
 * semget, shmget and the IPC_STAT, IPC_SET, IPC_RMID and *_INFO commands
 * of msgctl, semctl and shmctl, nothing else), after kbox checked them
 * against the guest's credentials (dispatch/sys_other_sysv.go), and opens
 * and removes the guest's POSIX message queues (OP_MQ_OPEN, OP_MQ_UNLINK;
 * dispatch/sys_other_ipc.go).
 *
 * Requests come from kbox only, over a SOCK_SEQPACKET socketpair (fd 4 at
 * start-up); the guest never holds its end. Each request is
 *   u32 op, u32 umask, u32 dirlen, u32 namelen, dir bytes, name bytes
 * with one or two fds (SCM_RIGHTS); each answer is an i32 (0 or an errno;
 * -1 for a queue OP_MQ_OPEN made) with at most one fd. OP_IPC's request
 * carries struct ipcreq and a buffer in place of dir; its answer is an i32
 * errno, 4 bytes of padding, the call's i64 result and the buffer after
 * the call. For a path bind, dir holds strings separated by NULs: the
 * directory to bind from, then the directories the kernel will walk
 * through for the name; all are clean paths of the binder's root (kbox
 * cleans them) and are made if missing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "binder.h"

enum { OP_BIND_PATH = 1, OP_BIND_AT = 2, OP_OPEN_IPC = 3, OP_IPC = 4, OP_SYSCTL = 5, OP_OPEN_DIAG = 6, OP_MQ_OPEN = 7, OP_MQ_UNLINK = 8 };

/* OP_MQ_OPEN's request: in place of the name, the guest's mq_open flags
 * and, when hasattr, its struct mq_attr (the kernel's: eight longs); the
 * queue's name is in place of dir. */
struct mqreq {
	uint32_t oflag, hasattr;
	long attr[8];
};

/* The calls of OP_IPC (unixsock/ipc.go). */
enum { IPC_MSGGET = 1, IPC_SEMGET, IPC_SHMGET, IPC_MSGCTL, IPC_SEMCTL, IPC_SHMCTL };

struct ipcreq {
	uint32_t call, bufarg; /* bufarg: the argument (1-3) that points to the buffer, or 0 */
	int64_t a[3];
};

#define IPC_BUF 512

struct req {
	uint32_t op, umask, dirlen, namelen;
};

#define MAX_DIR 4096
#define MAX_NAME 108
#define MAX_MADE 128

static int rootfd = -1;	 /* the binder's root: "/" once chrooted */
static int sysvipc = -1; /* /proc/sysvipc, opened before the chroot */
static int sysctl = -1;	 /* /proc/sys, likewise */

static void answer(int sock, int32_t err, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &err, .iov_len = sizeof(err) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* rel returns p without its leading slashes: a path relative to rootfd. */
static const char *rel(const char *p)
{
	while (*p == '/')
		p++;
	return p;
}

/* mkdirs makes every directory of dir (a path relative to rootfd, clean:
 * kbox sends lexically cleaned paths) that is missing, and records those
 * it made in made[], deepest last. */
static int mkdirs(const char *dir, char made[][MAX_DIR], int *nmade)
{
	char buf[MAX_DIR];
	size_t n = strlen(dir);

	if (n >= sizeof(buf))
		return ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (size_t i = 0; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		if (i == 0)
			continue;
		char c = buf[i];
		buf[i] = 0;
		if (mkdirat(rootfd, buf, 0700) == 0) {
			if (*nmade < MAX_MADE)
				strcpy(made[(*nmade)++], buf);
		} else if (errno != EEXIST) {
			return errno;
		}
		buf[i] = c;
	}
	return 0;
}

static void rmdirs(char made[][MAX_DIR], int nmade)
{
	while (nmade-- > 0)
		unlinkat(rootfd, made[nmade], AT_REMOVEDIR);
}

/* bind_path binds sock to name from directory dir (both relative to the
 * binder's root once rel() is applied, dir made if missing), opens the
 * new name O_PATH and unlinks it. */
static int bind_path(int sock, const char *dir, const char *mk, size_t mklen, const char *name, int *out)
{
	static char made[MAX_MADE][MAX_DIR];
	int nmade = 0, err = 0, fd = -1;
	struct sockaddr_un a;
	struct stat st;
	size_t n = strlen(name);

	if (n == 0 || n > sizeof(a.sun_path))
		return EINVAL;
	if (*rel(dir) && (err = mkdirs(rel(dir), made, &nmade)) != 0)
		goto out;
	for (const char *m = mk; m < mk + mklen; m += strlen(m) + 1)
		if (*rel(m) && (err = mkdirs(rel(m), made, &nmade)) != 0)
			goto out;
	if (fchdir(rootfd) != 0 || (*rel(dir) && chdir(rel(dir)) != 0)) {
		err = errno;
		goto out;
	}
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, name, n);
	if (bind(sock, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0) {
		err = errno;
		goto out;
	}
	fd = open(name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		err = fd < 0 ? errno : EIO;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	unlink(name);
out:
	fchdir(rootfd);
	rmdirs(made, nmade);
	*out = fd;
	return err;
}

static int bind_at(int sock, int dir, const char *name, mode_t mask)
{
	struct sockaddr_un a;
	size_t n = strlen(name);
	int err = 0;

	if (n == 0 || n > sizeof(a.sun_path) || strchr(name, '/') != NULL)
		return EINVAL;
	if (fchdir(dir) != 0)
		return errno;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, name, n);
	umask(mask);
	if (bind(sock, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0)
		err = errno;
	umask(0);
	fchdir(rootfd);
	return err;
}

static int open_ipc(const char *name, int *out)
{
	*out = -1;
	if (strcmp(name, "shm") != 0 && strcmp(name, "sem") != 0 && strcmp(name, "msg") != 0)
		return EINVAL;
	if (sysvipc < 0)
		return ENOENT;
	*out = openat(sysvipc, name, O_RDONLY | O_CLOEXEC);
	return *out < 0 ? errno : 0;
}

/* ipc_cmd_ok says that cmd is one of the commands OP_IPC runs for call. */
static int ipc_cmd_ok(uint32_t call, long cmd)
{
	if (cmd == IPC_RMID || cmd == IPC_SET || cmd == IPC_STAT || cmd == IPC_INFO)
		return 1;
	switch (call) {
	case IPC_MSGCTL:
		return cmd == MSG_STAT || cmd == MSG_INFO || cmd == MSG_STAT_ANY;
	case IPC_SEMCTL:
		return cmd == SEM_STAT || cmd == SEM_INFO || cmd == SEM_STAT_ANY;
	case IPC_SHMCTL:
		return cmd == SHM_STAT || cmd == SHM_INFO || cmd == SHM_STAT_ANY;
	}
	return 0;
}

/* do_ipc runs one System V IPC call for kbox in the guest's IPC namespace
 * and answers with its result and the buffer. */
static void do_ipc(int sock, const char *p, size_t n)
{
	static char buf[IPC_BUF];
	struct ipcreq q;
	long a[4] = { 0, 0, 0, 0 }, ret = -1;
	int32_t err = EINVAL, pad = 0;
	size_t blen = 0;

	memset(buf, 0, sizeof(buf));
	if (n >= sizeof(q) && n - sizeof(q) <= sizeof(buf)) {
		memcpy(&q, p, sizeof(q));
		blen = n - sizeof(q);
		memcpy(buf, p + sizeof(q), blen);
		for (int i = 0; i < 3; i++)
			a[i] = (long)q.a[i];
		if (q.bufarg >= 1 && q.bufarg <= 3)
			a[q.bufarg] = (long)buf;
		long nr = -1, cmd = 0;
		switch (q.call) {
		case IPC_MSGGET:
			nr = SYS_msgget;
			break;
		case IPC_SEMGET:
			nr = SYS_semget;
			break;
		case IPC_SHMGET:
			nr = SYS_shmget;
			break;
		case IPC_MSGCTL:
			nr = SYS_msgctl, cmd = a[1];
			break;
		case IPC_SEMCTL:
			nr = SYS_semctl, cmd = a[2];
			break;
		case IPC_SHMCTL:
			nr = SYS_shmctl, cmd = a[1];
			break;
		}
		if (nr >= 0 && (q.call <= IPC_SHMGET || ipc_cmd_ok(q.call, cmd))) {
			ret = syscall(nr, a[0], a[1], a[2], a[3]);
			err = ret < 0 ? errno : 0;
		}
	}
	char out[16 + IPC_BUF];
	int64_t r64 = ret;
	memcpy(out, &err, 4);
	memcpy(out + 4, &pad, 4);
	memcpy(out + 8, &r64, 8);
	memcpy(out + 16, buf, blen);
	struct iovec iov = { .iov_base = out, .iov_len = 16 + blen };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* do_sysctl reads /proc/sys/NAME, one of the IPC namespace's files (its
 * System V limits in kernel/, its message queues' in fs/mqueue/), or
 * writes data (n bytes) to it when n > 0, and answers as do_ipc: the
 * errno, the count and what was read. */
static void do_sysctl(int sock, const char *name, const char *data, size_t n)
{
	static const char *const names[] = {
		"kernel/msgmax",	   "kernel/msgmnb",	     "kernel/msgmni",	       "kernel/msg_next_id",
		"kernel/sem",		   "kernel/sem_next_id",     "kernel/shmall",	       "kernel/shmmax",
		"kernel/shmmni",	   "kernel/shm_rmid_forced", "kernel/shm_next_id",     "kernel/auto_msgmni",
		"fs/mqueue/msg_max",	   "fs/mqueue/msgsize_max",  "fs/mqueue/queues_max",   "fs/mqueue/msg_default",
		"fs/mqueue/msgsize_default",
	};
	char out[16 + 256];
	int32_t err = ENOENT, pad = 0;
	int64_t got = -1;
	size_t len = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i]) != 0)
			continue;
		int fd = sysctl < 0 ? -1 : openat(sysctl, name, (n > 0 ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
		if (fd < 0) {
			err = errno;
			break;
		}
		got = n > 0 ? write(fd, data, n) : read(fd, out + 16, 256);
		err = got < 0 ? errno : 0;
		if (n == 0 && got > 0)
			len = (size_t)got;
		close(fd);
		break;
	}
	memcpy(out, &err, 4);
	memcpy(out + 4, &pad, 4);
	memcpy(out + 8, &got, 8);
	struct iovec iov = { .iov_base = out, .iov_len = 16 + len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* mq_open_for opens the guest's queue name as oflag asks, making it when
 * oflag has O_CREAT and it does not exist, and says whether it made it
 * (*made). The queue is opened, or made, without O_CREAT|O_EXCL first and
 * then with both, so that what the binder tells kbox is what happened:
 * kbox keeps the guest's owner and mode of a queue it saw made and checks
 * the guest's credentials against them for one that existed (the binder's
 * own, the queue's host owner, always pass). A queue made with mode 0600:
 * every guest process has kbox's host uid. */
static int mq_open_for(const char *name, const struct mqreq *q, int *out, int *made)
{
	int acc = (int)(q->oflag & (O_ACCMODE | O_NONBLOCK)) | O_CLOEXEC;

	*made = 0;
	for (int tries = 0; tries < 16; tries++) {
		int fd = (int)syscall(SYS_mq_open, name, acc, 0, NULL);
		if (fd >= 0) {
			if ((q->oflag & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
				close(fd);
				return EEXIST;
			}
			*out = fd;
			return 0;
		}
		if (errno == EINVAL && (q->oflag & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
			/* Linux's EEXIST comes before the access mode's EINVAL. */
			fd = (int)syscall(SYS_mq_open, name, O_RDONLY | O_CLOEXEC, 0, NULL);
			if (fd >= 0) {
				close(fd);
				return EEXIST;
			}
			errno = EINVAL;
		}
		if (errno != ENOENT || !(q->oflag & O_CREAT))
			return errno;
		fd = (int)syscall(SYS_mq_open, name, acc | O_CREAT | O_EXCL, 0600, q->hasattr ? q->attr : NULL);
		if (fd >= 0) {
			*out = fd;
			*made = 1;
			return 0;
		}
		if (errno != EEXIST)
			return errno;
	}
	return EAGAIN;
}

/* serve answers kbox's requests until kbox closes its end. */
static void serve(int sock)
{
	static char buf[sizeof(struct req) + MAX_DIR + 2 * MAX_NAME];
	static char dir[MAX_DIR + 1], name[MAX_NAME + 1];
	char cbuf[CMSG_SPACE(2 * sizeof(int))];

	for (;;) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				      .msg_controllen = sizeof(cbuf) };
		int fds[2] = { -1, -1 }, nfds = 0, out = -1, err;
		struct req r;
		ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (nfds < 2)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
		memcpy(&r, buf, sizeof(r) < (size_t)n ? sizeof(r) : (size_t)n);
		if ((size_t)n >= sizeof(r) && r.op == OP_IPC) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			do_ipc(sock, buf + sizeof(r), r.dirlen <= (size_t)n - sizeof(r) ? r.dirlen : 0);
			continue;
		}
		if ((size_t)n < sizeof(r) || r.dirlen > MAX_DIR || r.namelen > MAX_NAME ||
		    sizeof(r) + r.dirlen + r.namelen != (size_t)n) {
			err = EINVAL;
		} else {
			memcpy(dir, buf + sizeof(r), r.dirlen);
			dir[r.dirlen] = 0;
			memcpy(name, buf + sizeof(r) + r.dirlen, r.namelen);
			name[r.namelen] = 0;
			switch (r.op) {
			case OP_BIND_PATH: {
				size_t cd = strlen(dir);
				const char *mk = dir + cd + 1;
				size_t mklen = cd < r.dirlen ? r.dirlen - cd - 1 : 0;
				err = nfds == 1 ? bind_path(fds[0], dir, mk, mklen, name, &out) : EINVAL;
				break;
			}
			case OP_BIND_AT:
				err = nfds == 2 ? bind_at(fds[0], fds[1], name, (mode_t)(r.umask & 0777)) : EINVAL;
				break;
			case OP_OPEN_IPC:
				err = open_ipc(name, &out);
				break;
			case OP_OPEN_DIAG:
				/* A socket-diagnostics socket of the guest's network
				 * namespace: kbox asks it for a unix socket's peer
				 * (unixsock/peercred.go). */
				out = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
				err = out < 0 ? errno : 0;
				break;
			case OP_MQ_OPEN: {
				struct mqreq q;
				int made = 0;
				if (r.namelen != sizeof(q)) {
					err = EINVAL;
					break;
				}
				memcpy(&q, name, sizeof(q));
				err = mq_open_for(dir, &q, &out, &made);
				if (err == 0 && made)
					err = -1; /* made: kbox records the guest's owner */
				break;
			}
			case OP_MQ_UNLINK:
				err = syscall(SYS_mq_unlink, dir) == 0 ? 0 : errno;
				break;
			case OP_SYSCTL:
				for (int i = 0; i < nfds; i++)
					close(fds[i]);
				do_sysctl(sock, name, dir, r.dirlen);
				continue;
			default:
				err = EINVAL;
			}
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		answer(sock, err, out);
		if (out >= 0)
			close(out);
	}
}

void kbox_run_binder(int sock, const char *dir, int chroot_ok)
{
	static const int ignored[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE,
				       SIGUSR1, SIGUSR2, SIGALRM };
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	setsid();
	umask(0);
	/* Nothing but its socket: the guest's start-up fds stay with the
	 * guest. */
	if (sock > 0)
		syscall(SYS_close_range, 0u, (unsigned int)sock - 1, 0u);
	syscall(SYS_close_range, (unsigned int)sock + 1, ~0u, 0u);
	sysvipc = open("/proc/sysvipc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	sysctl = open("/proc/sys", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int chrooted = 0;
	if (chroot_ok && chroot(dir) == 0) {
		if (chdir("/") != 0)
			_exit(1);
		rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		chrooted = 1;
	} else {
		rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (rootfd < 0 || fchdir(rootfd) != 0)
		_exit(1);
	/* The first answer, unasked: whether the guest's paths are kept. */
	answer(sock, chrooted, -1);
	serve(sock);
	_exit(0);
}
