/* unixsock: AF_UNIX sockets between guest processes, as on Linux.
 *
 *   unixsock stream PATH      server and client by path in two processes,
 *                             data both ways; names, SO_PEERCRED and
 *                             SO_PEERPIDFD, stat, EADDRINUSE, unlink
 *   unixsock dgram P1 P2      datagrams by path (sendto, recvfrom, reply)
 *   unixsock seqpacket PATH   records kept apart, by path
 *   unixsock pair             socketpair, stream and datagram
 *   unixsock rights FILE PATH FILE opened by one process, read by another
 *                             through SCM_RIGHTS; SCM_CREDENTIALS
 *   unixsock abstract NAME    connect to the abstract name NAME (prints errno)
 *   unixsock listen-abstract NAME MS
 *                             listen on the abstract name NAME for MS ms;
 *                             a guest client reaches it
 *   unixsock name PATH MS     bind, print getsockname, wait MS ms, exit
 *   unixsock self PATH        server and client by path in one process
 *                             (the in-process tiers run one): names, data
 *                             both ways, a datagram, EADDRINUSE
 *   unixsock block PATH       a connect that waits for room in a listener's
 *                             backlog, and a sendmsg that waits for room at
 *                             its receiver, while the other process makes
 *                             syscalls kbox serves
 *   unixsock client PATH      connect to the stream socket PATH, print
 *                             what it sends, send "from the guest"
 *   unixsock sendhost PATH    send datagrams to PATH from a socketpair's
 *                             socket (sendto, sendmsg) and connect to it:
 *                             PATH is a host socket outside the image,
 *                             which must stay out of reach
 *
 * Each prints what it saw, one fact a line, and "... ok" when all hold. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static socklen_t addr_of(struct sockaddr_un *a, const char *path)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	strncpy(a->sun_path, path, sizeof(a->sun_path) - 1);
	return (socklen_t)sizeof(*a);
}

static socklen_t abstract_of(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	strncpy(a->sun_path + 1, name, sizeof(a->sun_path) - 2);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

static void nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static const char *name_of(int fd, int peer)
{
	static char out[2][128];
	static int k;
	struct sockaddr_un a;
	socklen_t len = sizeof(a);
	char *o = out[k++ & 1];

	memset(&a, 0, sizeof(a));
	if ((peer ? getpeername(fd, (struct sockaddr *)&a, &len) : getsockname(fd, (struct sockaddr *)&a, &len)) != 0)
		snprintf(o, 128, "error %s", strerror(errno));
	else if (len <= offsetof(struct sockaddr_un, sun_path))
		snprintf(o, 128, "(unnamed)");
	else if (a.sun_path[0] == 0)
		snprintf(o, 128, "@%.*s", (int)(len - offsetof(struct sockaddr_un, sun_path) - 1), a.sun_path + 1);
	else
		snprintf(o, 128, "%s", a.sun_path);
	return o;
}

static int wait_child(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* server ready: the child writes one byte on a pipe once it listens. */
static int stream(const char *path, int type)
{
	const char *what = type == SOCK_STREAM ? "stream" : "seqpacket";
	struct sockaddr_un a;
	socklen_t alen = addr_of(&a, path);
	int ready[2];
	struct stat st;
	char buf[64];

	unlink(path);
	CHECK(pipe(ready) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		int s = socket(AF_UNIX, type, 0);
		CHECK(bind(s, (struct sockaddr *)&a, alen) == 0, "bind %s", path);
		CHECK(listen(s, 4) == 0, "listen");
		printf("server name %s\n", name_of(s, 0));
		fflush(stdout);
		write(ready[1], "r", 1);
		int c = accept(s, NULL, NULL);
		CHECK(c >= 0, "accept");
		printf("accepted name %s peer %s\n", name_of(c, 0), name_of(c, 1));
		/* SO_PEERCRED: the process that connected, with its ids. */
		struct ucred uc;
		socklen_t ul = sizeof(uc);
		CHECK(getsockopt(c, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0, "SO_PEERCRED");
		printf("accepted peer pid is %s, uid %s\n", uc.pid == getppid() ? "the client" : "another",
		       uc.uid == geteuid() && uc.gid == getegid() ? "and gid ours" : "or gid not ours");
		/* SO_PEERPIDFD (77, Linux 6.5): a pidfd of that process. */
		int pfd = -1;
		ul = sizeof(pfd);
		if (getsockopt(c, SOL_SOCKET, 77, &pfd, &ul) != 0) {
			printf("accepted peer pidfd %s\n", errno == ENOPROTOOPT ? "unsupported" : strerror(errno));
		} else {
			char info[64], line[128];
			long ppid = -1;
			snprintf(info, sizeof(info), "/proc/self/fdinfo/%d", pfd);
			FILE *f = fopen(info, "r");
			while (f != NULL && fgets(line, sizeof(line), f) != NULL)
				if (strncmp(line, "Pid:", 4) == 0)
					ppid = atol(line + 4);
			if (f != NULL)
				fclose(f);
			printf("accepted peer pidfd is %s\n", ppid == getppid() ? "the client's" : "another's");
			close(pfd);
		}
		if (type == SOCK_SEQPACKET) {
			ssize_t n1 = recv(c, buf, sizeof(buf), 0);
			ssize_t n2 = recv(c, buf + 32, 32, 0);
			printf("server got records of %zd and %zd bytes: %.*s %.*s\n", n1, n2, (int)n1, buf,
			       (int)n2, buf + 32);
		} else {
			ssize_t n = read(c, buf, sizeof(buf));
			printf("server got %.*s\n", (int)(n > 0 ? n : 0), buf);
		}
		CHECK(write(c, "pong", 4) == 4, "server write");
		fflush(stdout);
		_exit(bad);
	}
	char r;
	CHECK(read(ready[0], &r, 1) == 1, "server ready");
	CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode), "stat %s is a socket", path);
	printf("stat socket %d mode %o\n", S_ISSOCK(st.st_mode), (unsigned)(st.st_mode & 07777));
	int c = socket(AF_UNIX, type, 0);
	CHECK(connect(c, (struct sockaddr *)&a, alen) == 0, "connect %s", path);
	printf("client peer %s\n", name_of(c, 1));
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	CHECK(getsockopt(c, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0, "SO_PEERCRED");
	printf("client's peer pid is %s\n", uc.pid == pid ? "the server" : "another");
	if (type == SOCK_SEQPACKET) {
		CHECK(send(c, "one", 3, 0) == 3, "send one");
		CHECK(send(c, "three", 5, 0) == 5, "send three");
	} else {
		CHECK(write(c, "ping", 4) == 4, "client write");
	}
	ssize_t n = read(c, buf, sizeof(buf));
	printf("client got %.*s\n", (int)(n > 0 ? n : 0), buf);
	CHECK(wait_child(pid) == 0, "server");
	/* The name exists: another bind gives EADDRINUSE. */
	int d = socket(AF_UNIX, type, 0);
	errno = 0;
	int rc = bind(d, (struct sockaddr *)&a, alen);
	printf("second bind %d %s\n", rc, strerror(errno));
	CHECK(rc < 0 && errno == EADDRINUSE, "second bind");
	/* unlink removes the name; connecting then fails with ENOENT. */
	CHECK(unlink(path) == 0, "unlink");
	errno = 0;
	rc = stat(path, &st);
	printf("after unlink stat %d %s\n", rc, strerror(errno));
	int e = socket(AF_UNIX, type, 0);
	errno = 0;
	rc = connect(e, (struct sockaddr *)&a, alen);
	printf("connect after unlink %d %s\n", rc, strerror(errno));
	/* And the name can be bound again. */
	CHECK(bind(d, (struct sockaddr *)&a, alen) == 0, "bind again");
	unlink(path);
	printf("%s %s\n", what, bad ? "FAILED" : "ok");
	return bad;
}

static int dgram(const char *p1, const char *p2)
{
	struct sockaddr_un a1, a2, from;
	socklen_t l1 = addr_of(&a1, p1), l2 = addr_of(&a2, p2), fl = sizeof(from);
	char buf[64];

	unlink(p1);
	unlink(p2);
	int s = socket(AF_UNIX, SOCK_DGRAM, 0), c = socket(AF_UNIX, SOCK_DGRAM, 0);
	CHECK(bind(s, (struct sockaddr *)&a1, l1) == 0, "bind %s", p1);
	CHECK(bind(c, (struct sockaddr *)&a2, l2) == 0, "bind %s", p2);
	pid_t pid = fork();
	if (pid == 0) {
		ssize_t n = recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		printf("server got %.*s from %s\n", (int)(n > 0 ? n : 0), buf, from.sun_path);
		CHECK(sendto(s, "back", 4, 0, (struct sockaddr *)&from, fl) == 4, "reply");
		fflush(stdout);
		_exit(bad);
	}
	CHECK(sendto(c, "hello", 5, 0, (struct sockaddr *)&a1, l1) == 5, "sendto %s", p1);
	fl = sizeof(from);
	ssize_t n = recvfrom(c, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
	printf("client got %.*s from %s\n", (int)(n > 0 ? n : 0), buf, from.sun_path);
	CHECK(wait_child(pid) == 0, "server");
	/* sendmsg with a name, and to a name that does not exist. */
	struct iovec iov = { .iov_base = "viamsg", .iov_len = 6 };
	struct msghdr m = { .msg_name = &a1, .msg_namelen = l1, .msg_iov = &iov, .msg_iovlen = 1 };
	CHECK(sendmsg(c, &m, 0) == 6, "sendmsg %s", p1);
	n = recv(s, buf, sizeof(buf), 0);
	printf("sendmsg delivered %.*s\n", (int)(n > 0 ? n : 0), buf);
	struct sockaddr_un nx;
	socklen_t nl = addr_of(&nx, "/nonexistent/sock");
	errno = 0;
	int rc = (int)sendto(c, "x", 1, 0, (struct sockaddr *)&nx, nl);
	printf("sendto missing %d %s\n", rc, strerror(errno));
	/* A regular file is no socket: ECONNREFUSED. */
	errno = 0;
	nl = addr_of(&nx, "/etc/passwd");
	rc = (int)sendto(c, "x", 1, 0, (struct sockaddr *)&nx, nl);
	printf("sendto file %d %s\n", rc, strerror(errno));
	/* connect, then plain send. */
	CHECK(connect(c, (struct sockaddr *)&a1, l1) == 0, "connect dgram");
	CHECK(send(c, "conn", 4, 0) == 4, "send connected");
	n = recv(s, buf, sizeof(buf), 0);
	printf("connected send delivered %.*s\n", (int)(n > 0 ? n : 0), buf);
	unlink(p1);
	unlink(p2);
	printf("dgram %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int pair(void)
{
	int sv[2], dv[2];
	char buf[16];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair stream");
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, dv) == 0, "socketpair dgram");
	pid_t pid = fork();
	if (pid == 0) {
		ssize_t n = read(sv[1], buf, sizeof(buf));
		CHECK(write(sv[1], buf, (size_t)n) == n, "echo");
		n = recv(dv[1], buf, sizeof(buf), 0);
		CHECK(send(dv[1], buf, (size_t)n, 0) == n, "echo dgram");
		_exit(bad);
	}
	CHECK(write(sv[0], "stream", 6) == 6, "write");
	ssize_t n = read(sv[0], buf, sizeof(buf));
	printf("pair stream echo %.*s\n", (int)(n > 0 ? n : 0), buf);
	struct iovec iov = { .iov_base = "dgram", .iov_len = 5 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	CHECK(sendmsg(dv[0], &m, 0) == 5, "sendmsg dgram");
	n = recv(dv[0], buf, sizeof(buf), 0);
	printf("pair dgram echo %.*s\n", (int)(n > 0 ? n : 0), buf);
	CHECK(wait_child(pid) == 0, "child");
	printf("pair %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int rights(const char *file, const char *path)
{
	struct sockaddr_un a;
	socklen_t alen = addr_of(&a, path);
	int ready[2];
	char buf[256];

	unlink(path);
	CHECK(pipe(ready) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		int one = 1;
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		CHECK(bind(s, (struct sockaddr *)&a, alen) == 0, "bind");
		CHECK(listen(s, 1) == 0, "listen");
		write(ready[1], "r", 1);
		int c = accept(s, NULL, NULL);
		CHECK(setsockopt(c, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) == 0, "SO_PASSCRED");
		char cbuf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))], b;
		struct iovec iov = { .iov_base = &b, .iov_len = 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf) };
		CHECK(write(ready[1], "s", 1) == 1, "passcred set");
		CHECK(recvmsg(c, &m, 0) == 1, "recvmsg");
		int fd = -1;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
			if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
				memcpy(&fd, CMSG_DATA(h), sizeof(int));
			if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS) {
				struct ucred u;
				memcpy(&u, CMSG_DATA(h), sizeof(u));
				printf("credentials: sender pid %s, uid %u\n",
				       u.pid == getppid() ? "is the client" : "is not the client", (unsigned)u.uid);
			}
		}
		CHECK(fd >= 0, "no fd received");
		lseek(fd, 0, SEEK_SET);
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		printf("received fd reads: %.*s", (int)(n > 0 ? n : 0), buf);
		fflush(stdout);
		_exit(bad);
	}
	char r;
	CHECK(read(ready[0], &r, 1) == 1, "ready");
	int f = open(file, O_RDONLY);
	CHECK(f >= 0, "open %s", file);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(connect(c, (struct sockaddr *)&a, alen) == 0, "connect");
	CHECK(read(ready[0], &r, 1) == 1, "passcred ready");
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { .iov_base = "F", .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &f, sizeof(int));
	CHECK(sendmsg(c, &m, 0) == 1, "sendmsg SCM_RIGHTS");
	/* A closed fd cannot be passed. */
	int closed = 900;
	memcpy(CMSG_DATA(h), &closed, sizeof(int));
	errno = 0;
	int rc = (int)sendmsg(c, &m, 0);
	printf("passing a closed fd %d %s\n", rc, strerror(errno));
	CHECK(wait_child(pid) == 0, "server");
	unlink(path);
	printf("rights %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int abstract(const char *name)
{
	struct sockaddr_un a;
	socklen_t alen = abstract_of(&a, name);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	errno = 0;
	int rc = connect(c, (struct sockaddr *)&a, alen);
	printf("abstract connect %d %s\n", rc, rc == 0 ? "connected" : strerror(errno));
	int d = socket(AF_UNIX, SOCK_DGRAM, 0);
	errno = 0;
	rc = (int)sendto(d, "x", 1, 0, (struct sockaddr *)&a, alen);
	printf("abstract sendto %d %s\n", rc, rc >= 0 ? "sent" : strerror(errno));
	return 0;
}

static int listen_abstract(const char *name, long ms)
{
	struct sockaddr_un a;
	socklen_t alen = abstract_of(&a, name);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	errno = 0;
	int rc = bind(s, (struct sockaddr *)&a, alen);
	printf("abstract bind %d %s\n", rc, rc == 0 ? "bound" : strerror(errno));
	if (rc != 0)
		return 1;
	CHECK(listen(s, 4) == 0, "listen");
	printf("abstract name %s\n", name_of(s, 0));
	fflush(stdout);
	/* A guest client reaches it. */
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(connect(c, (struct sockaddr *)&a, alen) == 0, "guest connect to its own abstract name");
	int x = accept(s, NULL, NULL);
	CHECK(x >= 0 && write(c, "abs", 3) == 3, "accept");
	char buf[4] = { 0 };
	CHECK(read(x, buf, 3) == 3, "read");
	printf("guest to guest %s\n", buf);
	fflush(stdout);
	nap(ms);
	printf("listen-abstract %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int name(const char *path, long ms)
{
	struct sockaddr_un a;
	socklen_t alen = addr_of(&a, path);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	unlink(path);
	CHECK(bind(s, (struct sockaddr *)&a, alen) == 0, "bind %s", path);
	CHECK(listen(s, 1) == 0, "listen");
	printf("getsockname %s\n", name_of(s, 0));
	char link[64], target[256];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", s);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	printf("readlink %s\n", n < 0 ? strerror(errno) : (target[n] = 0, target));
	nap(ms);
	return bad;
}

static int self(const char *path)
{
	struct sockaddr_un a;
	socklen_t alen = addr_of(&a, path);
	char buf[16] = { 0 };
	unlink(path);
	int srv = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(srv, (struct sockaddr *)&a, alen) == 0, "bind %s", path);
	CHECK(listen(srv, 4) == 0, "listen");
	struct stat st;
	printf("stat socket %d\n", stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
	int cl = socket(AF_UNIX, SOCK_STREAM, 0);
	int conn = connect(cl, (struct sockaddr *)&a, alen);
	CHECK(conn == 0, "connect %s", path);
	printf("server name %s\n", name_of(srv, 0));
	if (conn == 0) { /* else accept would wait for ever: one process */
		int acc = accept(srv, NULL, NULL);
		CHECK(acc >= 0, "accept");
		printf("client peer %s\n", name_of(cl, 1));
		CHECK(write(cl, "ping", 4) == 4, "write");
		CHECK(read(acc, buf, sizeof(buf) - 1) == 4, "read");
		printf("server got %s\n", buf);
	}
	int again = socket(AF_UNIX, SOCK_STREAM, 0);
	errno = 0;
	int r = bind(again, (struct sockaddr *)&a, alen);
	printf("second bind %d %s\n", r, r ? strerror(errno) : "");
	/* a datagram to a bound path */
	struct sockaddr_un d;
	char dpath[128];
	snprintf(dpath, sizeof(dpath), "%s.d", path);
	socklen_t dlen = addr_of(&d, dpath);
	unlink(dpath);
	int ds = socket(AF_UNIX, SOCK_DGRAM, 0), dc = socket(AF_UNIX, SOCK_DGRAM, 0);
	CHECK(bind(ds, (struct sockaddr *)&d, dlen) == 0, "bind %s", dpath);
	int sent = (int)sendto(dc, "dg", 2, 0, (struct sockaddr *)&d, dlen);
	CHECK(sent == 2, "sendto");
	memset(buf, 0, sizeof(buf));
	if (sent == 2) {
		CHECK(recv(ds, buf, sizeof(buf) - 1, 0) == 2, "recv");
		printf("datagram got %s\n", buf);
	}
	unlink(dpath);
	unlink(path);
	printf("after unlink stat %d\n", stat(path, &st));
	if (!bad)
		printf("self ok\n");
	return bad;
}

static int block(const char *path)
{
	struct sockaddr_un a;
	socklen_t alen = addr_of(&a, path);
	int go[2];
	struct stat st;
	char r;

	unlink(path);
	CHECK(pipe(go) == 0, "pipe");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(s, (struct sockaddr *)&a, alen) == 0, "bind");
	CHECK(listen(s, 0) == 0, "listen");
	pid_t pid = fork();
	if (pid == 0) {
		/* The server: room in the backlog only after a while, during
		 * which it makes syscalls that kbox serves. */
		CHECK(read(go[0], &r, 1) == 1, "go");
		nap(200);
		CHECK(stat("/etc/hostname", &st) == 0, "stat while a connect waits");
		int c1 = accept(s, NULL, NULL), c2 = accept(s, NULL, NULL);
		CHECK(c1 >= 0 && c2 >= 0, "accept");
		_exit(bad);
	}
	int c1 = socket(AF_UNIX, SOCK_STREAM, 0), c2 = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(connect(c1, (struct sockaddr *)&a, alen) == 0, "first connect");
	CHECK(write(go[1], "g", 1) == 1, "go");
	CHECK(connect(c2, (struct sockaddr *)&a, alen) == 0, "connect waiting for the backlog");
	CHECK(wait_child(pid) == 0, "server");
	printf("waiting connect ok\n");

	int sv[2];
	static char big[60000];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0, "socketpair");
	pid = fork();
	if (pid == 0) {
		/* The receiver reads only after a while. */
		nap(200);
		CHECK(stat("/etc/hostname", &st) == 0, "stat while a send waits");
		int n = 0;
		for (int i = 0; i < 8; i++)
			n += recv(sv[1], big, sizeof(big), 0) == (ssize_t)sizeof(big);
		printf("receiver got %d datagrams\n", n);
		_exit(bad);
	}
	struct iovec iov = { .iov_base = big, .iov_len = sizeof(big) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int sent = 0;
	for (int i = 0; i < 8; i++)
		sent += sendmsg(sv[0], &m, 0) == (ssize_t)sizeof(big);
	printf("sender sent %d datagrams\n", sent);
	CHECK(wait_child(pid) == 0, "receiver");
	unlink(path);
	printf("block %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int client(const char *path)
{
	struct sockaddr_un a;
	socklen_t alen = addr_of(&a, path);
	char buf[128];
	int c = socket(AF_UNIX, SOCK_STREAM, 0);

	errno = 0;
	int rc = connect(c, (struct sockaddr *)&a, alen);
	printf("client connect %d %s\n", rc, rc < 0 ? strerror(errno) : "connected");
	if (rc < 0)
		return 1;
	ssize_t n = read(c, buf, sizeof(buf));
	printf("client got %.*s\n", (int)(n > 0 ? n : 0), buf);
	CHECK(write(c, "from the guest", 14) == 14, "write");
	return bad;
}

static int sendhost(const char *path)
{
	struct sockaddr_un a;
	socklen_t alen = addr_of(&a, path);
	int sv[2];

	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0, "socketpair");
	errno = 0;
	int rc = (int)sendto(sv[0], "escape-sendto", 13, 0, (struct sockaddr *)&a, alen);
	printf("sendto host path %d %s\n", rc, rc < 0 ? strerror(errno) : "sent");
	struct iovec iov = { .iov_base = "escape-sendmsg", .iov_len = 14 };
	struct msghdr m = { .msg_name = &a, .msg_namelen = alen, .msg_iov = &iov, .msg_iovlen = 1 };
	errno = 0;
	rc = (int)sendmsg(sv[0], &m, 0);
	printf("sendmsg host path %d %s\n", rc, rc < 0 ? strerror(errno) : "sent");
	int d = socket(AF_UNIX, SOCK_DGRAM, 0);
	errno = 0;
	rc = d < 0 ? -1 : connect(d, (struct sockaddr *)&a, alen);
	printf("connect host path %d %s\n", rc, rc < 0 ? strerror(errno) : "connected");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && strcmp(argv[1], "stream") == 0)
		return stream(argv[2], SOCK_STREAM);
	if (argc >= 3 && strcmp(argv[1], "seqpacket") == 0)
		return stream(argv[2], SOCK_SEQPACKET);
	if (argc >= 4 && strcmp(argv[1], "dgram") == 0)
		return dgram(argv[2], argv[3]);
	if (argc >= 2 && strcmp(argv[1], "pair") == 0)
		return pair();
	if (argc >= 4 && strcmp(argv[1], "rights") == 0)
		return rights(argv[2], argv[3]);
	if (argc >= 3 && strcmp(argv[1], "abstract") == 0)
		return abstract(argv[2]);
	if (argc >= 4 && strcmp(argv[1], "listen-abstract") == 0)
		return listen_abstract(argv[2], atol(argv[3]));
	if (argc >= 4 && strcmp(argv[1], "name") == 0)
		return name(argv[2], atol(argv[3]));
	if (argc >= 3 && strcmp(argv[1], "block") == 0)
		return block(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "self") == 0)
		return self(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "client") == 0)
		return client(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "sendhost") == 0)
		return sendhost(argv[2]);
	fprintf(stderr, "usage: unixsock stream|seqpacket|dgram|pair|rights|abstract|listen-abstract|name|self|block|client|sendhost ...\n");
	return 2;
}
