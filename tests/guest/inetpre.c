/*
 * inetpre: a TCP socket before it connects, and connects again after a
 * connect that failed; prints one line per call so that the output run
 * natively on the host's loopback is the same.
 *
 *   inetpre io ADDR 0     reads, recvs, writes and sends on fresh
 *                         unconnected TCP sockets (IPv4 and IPv6),
 *                         blocking and non-blocking: ENOTCONN for the
 *                         reads, EPIPE and SIGPIPE for the writes (EPIPE
 *                         alone with MSG_NOSIGNAL), poll's events,
 *                         shutdown; then the socket connects to a
 *                         listener on ADDR and echoes; a closed fresh
 *                         socket frees its port; 3000 fresh sockets
 *                         opened and closed one after another
 *   inetpre race ADDR 0   a non-blocking connect to a port bound but not
 *                         listening (refused), then the port listens and
 *                         the socket connects again at once, as asyncio's
 *                         test_sock_client_connect_racing does: the
 *                         refusal not yet read gives ECONNREFUSED, then a
 *                         new connect; once connected, connect gives 0
 *                         once, then EISCONN; the same with the refusal
 *                         read from SO_ERROR first (ECONNABORTED)
 *   inetpre preauth ADDR 0  a peer sends, then closes with SO_LINGER 0 (a
 *                         reset): getpeername says ENOTCONN at once, and
 *                         a non-blocking recv of one byte still reads
 *                         what came before the reset (CPython's test_ssl
 *                         test_preauth_data_to_tls_client and _server:
 *                         ssl's wrap_socket does exactly these two calls);
 *                         at once and 100 ms later
 *
 * No mode forks: the program runs in every tier.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static volatile int pipes;

static void onpipe(int sig)
{
	(void)sig;
	pipes++;
}

static const char *res(long r)
{
	static char b[4][96];
	static int next;
	char *s = b[next++ % 4];
	if (r < 0)
		snprintf(s, 96, "-1 %s", strerror(errno));
	else
		snprintf(s, 96, "%ld", r);
	return s;
}

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(1);
}

static struct sockaddr_storage any;
static socklen_t anylen;

/* A listener on ADDR (port 0: any); its address in *at. */
static int listener(struct sockaddr_storage *at, socklen_t *len, int listening)
{
	int l = socket(any.ss_family, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&any, anylen) < 0)
		die("bind");
	if (listening && listen(l, 8) < 0)
		die("listen");
	*len = sizeof(*at);
	if (getsockname(l, (struct sockaddr *)at, len) < 0)
		die("getsockname");
	return l;
}

/* Every data call on fresh socket s, each line prefixed with what. */
static void calls(int s, const char *what)
{
	char b[4] = { 0 };
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	struct iovec iov = { b, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	printf("%s read: %s\n", what, res(read(s, b, 1)));
	printf("%s recv: %s\n", what, res(recv(s, b, 1, 0)));
	printf("%s recv MSG_DONTWAIT: %s\n", what, res(recv(s, b, 1, MSG_DONTWAIT)));
	printf("%s recvfrom with an address: %s\n", what, res(recvfrom(s, b, 1, 0, (struct sockaddr *)&from, &fl)));
	printf("%s recvmsg: %s\n", what, res(recvmsg(s, &m, 0)));
	printf("%s readv: %s\n", what, res(readv(s, &iov, 1)));
	long r;
	pipes = 0;
	r = write(s, "x", 1);
	printf("%s write: %s, SIGPIPE %d\n", what, res(r), pipes);
	pipes = 0;
	r = send(s, "x", 1, 0);
	printf("%s send: %s, SIGPIPE %d\n", what, res(r), pipes);
	pipes = 0;
	r = send(s, "x", 1, MSG_NOSIGNAL);
	printf("%s send MSG_NOSIGNAL: %s, SIGPIPE %d\n", what, res(r), pipes);
	pipes = 0;
	r = sendto(s, "x", 1, 0, (struct sockaddr *)&any, anylen);
	printf("%s sendto with an address: %s, SIGPIPE %d\n", what, res(r), pipes);
	pipes = 0;
	r = sendmsg(s, &m, MSG_NOSIGNAL);
	printf("%s sendmsg MSG_NOSIGNAL: %s, SIGPIPE %d\n", what, res(r), pipes);
	pipes = 0;
	r = sendmsg(s, &m, 0);
	printf("%s sendmsg: %s, SIGPIPE %d\n", what, res(r), pipes);
	pipes = 0;
	r = writev(s, &iov, 1);
	printf("%s writev: %s, SIGPIPE %d\n", what, res(r), pipes);
	struct pollfd p = { s, POLLIN | POLLOUT | POLLPRI, 0 };
	int n = poll(&p, 1, 0);
	printf("%s poll: %d%s%s%s%s\n", what, n, p.revents & POLLIN ? " IN" : "", p.revents & POLLOUT ? " OUT" : "",
	       p.revents & POLLHUP ? " HUP" : "", p.revents & POLLERR ? " ERR" : "");
	printf("%s getpeername: %s\n", what, res(getpeername(s, (struct sockaddr *)&from, &fl)));
}

static int do_io(void)
{
	int fams[] = { AF_INET, AF_INET6 };
	for (int i = 0; i < 2; i++) {
		for (int nb = 0; nb < 2; nb++) {
			int s = socket(fams[i], SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);
			if (s < 0)
				die("socket");
			char what[32];
			snprintf(what, sizeof(what), "%s %s", i ? "IPv6" : "IPv4", nb ? "non-blocking" : "blocking");
			alarm(5); /* a call that waits is the fault */
			calls(s, what);
			alarm(0);
			printf("%s shutdown: %s\n", what, res(shutdown(s, SHUT_RDWR)));
			close(s);
		}
	}
	/* After all that, the socket still connects and carries data. */
	struct sockaddr_storage at;
	socklen_t al;
	int l = listener(&at, &al, 1);
	int c = socket(any.ss_family, SOCK_STREAM, 0);
	char b[8] = { 0 };
	read(c, b, 1);
	send(c, "x", 1, MSG_NOSIGNAL);
	if (connect(c, (struct sockaddr *)&at, al) < 0)
		die("connect");
	int a = accept(l, NULL, NULL);
	if (a < 0 || write(c, "ping", 4) != 4 || read(a, b, 4) != 4)
		die("echo");
	printf("connected after the calls: read '%s'\n", b);
	close(a);
	close(c);
	/* A fresh socket's close frees its port at once. */
	int f = socket(any.ss_family, SOCK_STREAM, 0);
	if (bind(f, (struct sockaddr *)&any, anylen) < 0)
		die("bind fresh");
	struct sockaddr_storage fa;
	socklen_t fal = sizeof(fa);
	getsockname(f, (struct sockaddr *)&fa, &fal);
	close(f);
	int g = socket(any.ss_family, SOCK_STREAM, 0);
	printf("bind to a closed fresh socket's port: %s\n", res(bind(g, (struct sockaddr *)&fa, fal)));
	close(g);
	/* Closed fresh sockets are ended: no bound on open sockets is met. */
	int i;
	for (i = 0; i < 3000; i++) {
		int s = socket(any.ss_family, SOCK_STREAM, 0);
		if (s < 0)
			break;
		close(s);
	}
	printf("fresh sockets opened and closed: %d\n", i);
	return 0;
}

/* Waits until the connect in progress on c is over (writable or an
 * error), as a caller that waits for the refusal would. */
static void settle(int c)
{
	struct pollfd p = { c, POLLOUT, 0 };
	poll(&p, 1, 5000);
}

static void race(const char *what, int read_error, int at_once)
{
	struct sockaddr_storage at;
	socklen_t al;
	int l = listener(&at, &al, 0);
	int c = socket(any.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	printf("%s: connect to a port not listening: %s\n", what, res(connect(c, (struct sockaddr *)&at, al)));
	if (!at_once)
		settle(c);
	if (read_error) {
		int v = 0;
		socklen_t vl = sizeof(v);
		settle(c);
		getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl);
		printf("%s: SO_ERROR: %s\n", what, strerror(v));
	}
	if (listen(l, 8) < 0)
		die("listen");
	printf("%s: connect again: %s\n", what, res(connect(c, (struct sockaddr *)&at, al)));
	printf("%s: and again: %s\n", what, res(connect(c, (struct sockaddr *)&at, al)));
	struct pollfd p = { c, POLLOUT, 0 };
	int n = poll(&p, 1, 5000);
	int v = -1;
	socklen_t vl = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl);
	printf("%s: poll: %d%s, SO_ERROR %d\n", what, n, p.revents & POLLOUT ? " OUT" : "", v);
	printf("%s: connect once connected: %s\n", what, res(connect(c, (struct sockaddr *)&at, al)));
	printf("%s: and again: %s\n", what, res(connect(c, (struct sockaddr *)&at, al)));
	int a = accept(l, NULL, NULL);
	char b[8] = { 0 };
	if (a < 0 || write(c, "pong", 4) != 4)
		die("echo");
	p.fd = a;
	p.events = POLLIN;
	poll(&p, 1, 5000);
	printf("%s: echo: %s '%s'\n", what, res(read(a, b, 4)), b);
	close(a);
	close(c);
	close(l);
}

static int do_race(void)
{
	race("at once", 0, 1);
	race("after the refusal", 0, 0);
	race("after SO_ERROR", 1, 0);
	return 0;
}

/* What the side that did not close sees once the other side's close
 * with SO_LINGER 0 has returned. */
static void preauth(const char *what, int server_closes, int pause)
{
	struct sockaddr_storage at, peer;
	socklen_t al, pl = sizeof(peer);
	int l = listener(&at, &al, 1);
	int c = socket(any.ss_family, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&at, al) < 0)
		die("connect");
	int a = accept(l, NULL, NULL);
	if (a < 0)
		die("accept");
	int closer = server_closes ? a : c, other = server_closes ? c : a;
	struct linger lg = { 1, 0 };
	setsockopt(closer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (send(closer, "HTTP/1.0 307\r\n\r\n", 17, 0) != 17)
		die("send");
	close(closer);
	if (pause)
		usleep(100000); /* the reset has come through, whatever the way */
	printf("%s: getpeername after the reset: %s\n", what, res(getpeername(other, (struct sockaddr *)&peer, &pl)));
	char b[32] = { 0 };
	printf("%s: non-blocking recv of 1: %s '%s'\n", what, res(recv(other, b, 1, MSG_DONTWAIT)), b);
	close(other);
	close(l);
}

static int do_preauth(void)
{
	preauth("client", 1, 0);
	preauth("server", 0, 0);
	preauth("client later", 1, 1);
	preauth("server later", 0, 1);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: inetpre io|race|preauth ADDR [PORT]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, onpipe);
	if (strchr(argv[2], ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&any;
		a->sin6_family = AF_INET6;
		anylen = sizeof(*a);
		if (inet_pton(AF_INET6, argv[2], &a->sin6_addr) != 1)
			return 2;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&any;
		a->sin_family = AF_INET;
		anylen = sizeof(*a);
		if (inet_pton(AF_INET, argv[2], &a->sin_addr) != 1)
			return 2;
	}
	if (!strcmp(argv[1], "io"))
		return do_io();
	if (!strcmp(argv[1], "race"))
		return do_race();
	if (!strcmp(argv[1], "preauth"))
		return do_preauth();
	fprintf(stderr, "inetpre: unknown mode %s\n", argv[1]);
	return 2;
}
