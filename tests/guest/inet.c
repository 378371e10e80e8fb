/* Internet sockets in the guest (tests/net_test.go), against an echo
 * server at ADDR PORT that answers each message with the same bytes.
 *
 *   inet poll ADDR PORT     poll on a TCP socket and a pipe together
 *   inet epoll ADDR PORT    non-blocking connect, epoll for EPOLLOUT,
 *                           SO_ERROR, then an echo through epoll
 *   inet refused ADDR PORT  non-blocking connect to a refused port:
 *                           EPOLLOUT, then SO_ERROR = ECONNREFUSED
 *   inet udp ADDR PORT      sendto, recvfrom with the source address
 *   inet udperr ADDR PORT   datagrams to a closed PORT: a connected
 *                           socket's recvfrom fails with ECONNREFUSED
 *                           once, SO_ERROR takes the error instead, and
 *                           the socket goes on (100 refusals more); with
 *                           IP_RECVERR the error queue (MSG_ERRQUEUE) has
 *                           the datagram and the ICMP error's fields
 *   inet names ADDR PORT    getsockname, getpeername, SO_TYPE, SO_DOMAIN
 *   inet bulk ADDR PORT MB  send MB megabytes, read the echo's byte count
 *                           back as text, print MB/s (for benchmarks)
 *   inet rtt ADDR PORT N    N round trips of 64 bytes, print µs each
 *   inet rebind ADDR 0 N    N times: bind a socket to ADDR port 0, close
 *                           it, bind another to its port at once (how
 *                           test frameworks find a free port); then N
 *                           listeners with SO_REUSEADDR, each closed and
 *                           its port listened on again at once (a server
 *                           restarting); prints "rebind ok 2N"
 *   inet conns ADDR PORT N  N connections one after another, each
 *                           echoing one byte, print connections per second
 *   inet hold ADDR PORT N   N connections held open at once, each echoing
 *                           one byte; print "held N", wait for EOF on
 *                           stdin, then echo one byte on each again and
 *                           print "all N echoed" (idle connections' cost)
 *   inet server ADDR 0      a guest server on ADDR: EAGAIN from a
 *                           non-blocking accept with nobody waiting, then
 *                           a client thread connects; poll says the
 *                           listener is readable, accept4 gives the peer,
 *                           the echo goes both ways
 *   inet serve ADDR PORT N  a guest server reached from the host through
 *                           --publish: listen on ADDR:PORT, then for each
 *                           of N connections echo what arrives until EOF,
 *                           answer "served K bytes" and close
 *   inet userve ADDR PORT N  the same for N UDP datagrams: each answered
 *                           with "re:" and its bytes
 *   inet http NAME PORT     resolve NAME with getaddrinfo (musl's resolver:
 *                           /etc/hosts, then /etc/resolv.conf's server),
 *                           print the address, GET / and print the reply
 *   inet parallel ADDR PORT N  N non-blocking connections at once, each
 *                           sending its own 200000 bytes and checking the
 *                           echo, driven by one poll loop
 *   inet acceptsig ADDR 0   a blocking accept interrupted by SIGALRM
 *                           (no SA_RESTART): EINTR; the next accept takes
 *                           a client that came later, the echo works
 *   inet connectsig ADDR 0  a blocking connect to a listener whose queue
 *                           is full, interrupted by SIGALRM: EINTR, then
 *                           EALREADY (non-blocking) and not writable
 *                           while the kernel goes on; once the queue has
 *                           room a blocking connect waits for it and
 *                           gives 0, then writable, SO_ERROR 0, EISCONN
 *   inet reset ADDR 0       a server closes with SO_LINGER 0: the client
 *                           reads what came before, then ECONNRESET
 *                           once, then EOF
 *   inet readall ADDR PORT  connect, read until EOF, print what came
 *   inet closedlistener ADDR 0  connects right after a listener's close
 *                           are refused
 *   inet sndbuf ADDR 0      a 4 KiB SO_SNDBUF bounds what queues while the
 *                           peer reads nothing; its close fails writes
 *   inet unreadclose ADDR 0  the peer closes with data unread: the
 *                           client's writes fail
 *   inet resetblocked ADDR 0  a write blocked on a full connection fails
 *                           when the peer resets it
 *   inet writeafterfin ADDR PORT  the peer (the loopback's with PORT 0)
 *                           reads all and closes: the client's writes
 *                           after EOF fail
 *   inet udpempty ADDR 0    an empty datagram, then one with data, on
 *                           the loopback; then shutdown(SHUT_WR)
 *   inet unconnected ADDR 0  reads before connect fail at once; then a
 *                           non-blocking connect and an echo
 *   inet urgent ADDR 0      TCP urgent data both ways on the loopback:
 *                           POLLPRI, a read stopping at the mark,
 *                           SIOCATMARK, recv(MSG_OOB); then SO_OOBINLINE
 *   inet rreset ADDR PORT   connect to a server that resets at once: the
 *                           first read gives ECONNRESET (or EOF)
 *   inet errqueue ADDR 0    a TCP connection's error queue (MSG_ERRQUEUE)
 *                           through recv, recvfrom with and without a
 *                           source and recvmsg: EAGAIN, empty, also with
 *                           data waiting, which a plain recv then reads
 *   inet atmark ADDR 0      SIOCATMARK on a UDP socket (ENOTTY, as every
 *                           ioctl UDP does not know) and on a TCP one (0)
 *   inet connerr ADDR 0     connects that fail at once (the broadcast
 *                           address, a short address, the wrong family),
 *                           non-blocking and blocking: the error itself,
 *                           not EINPROGRESS; then the socket connects
 *                           to a listener on ADDR; a blocking connect to
 *                           a full queue ends at SO_SNDTIMEO (EINPROGRESS)
 *
 * No mode forks: the program runs in every tier.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in dest;

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(1);
}

static int tcp_connect(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		die("socket");
	if (connect(s, (struct sockaddr *)&dest, sizeof(dest)) < 0)
		die("connect");
	return s;
}

static const char *ev(short r)
{
	static char bufs[4][16];
	static int next;
	char *b = bufs[next++ % 4];
	snprintf(b, 16, "%s%s%s", r & POLLIN ? "IN" : "", r & POLLOUT ? "OUT" : "", r & POLLHUP ? "HUP" : "");
	return r ? b : "-";
}

static int do_poll(void)
{
	int s = tcp_connect(), p[2];
	if (pipe(p) < 0)
		die("pipe");
	struct pollfd fds[2] = { { s, POLLIN, 0 }, { p[0], POLLIN, 0 } };
	int n = poll(fds, 2, 200);
	printf("idle: %d sock=%s pipe=%s\n", n, ev(fds[0].revents), ev(fds[1].revents));
	write(p[1], "x", 1);
	n = poll(fds, 2, 2000);
	printf("pipe written: %d sock=%s pipe=%s\n", n, ev(fds[0].revents), ev(fds[1].revents));
	char c;
	read(p[0], &c, 1);
	write(s, "hello", 5);
	n = poll(fds, 2, 5000);
	printf("echo sent: %d sock=%s pipe=%s\n", n, ev(fds[0].revents), ev(fds[1].revents));
	char buf[16] = { 0 };
	int m = read(s, buf, sizeof(buf) - 1);
	printf("read %d %s\n", m, buf);
	shutdown(s, SHUT_WR);
	n = poll(fds, 1, 5000);
	m = read(s, buf, sizeof(buf));
	printf("after shutdown: %d sock=%s read=%d\n", n, ev(fds[0].revents), m);
	return 0;
}

static int nb_connect(int *errp)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (s < 0)
		die("socket");
	int r = connect(s, (struct sockaddr *)&dest, sizeof(dest));
	printf("connect: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	int ep = epoll_create1(0);
	struct epoll_event e = { .events = EPOLLOUT, .data.fd = s };
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
	struct epoll_event got;
	int n = epoll_wait(ep, &got, 1, 5000);
	printf("epoll: %d%s\n", n, n == 1 && (got.events & EPOLLOUT) ? " OUT" : "");
	int err = -1;
	socklen_t l = sizeof(err);
	getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
	printf("SO_ERROR: %s\n", err ? strerror(err) : "0");
	*errp = err;
	close(ep);
	return s;
}

static int do_epoll(void)
{
	int err, s = nb_connect(&err);
	if (err)
		return 1;
	int ep = epoll_create1(0);
	struct epoll_event e = { .events = EPOLLIN, .data.fd = s }, got;
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
	printf("idle: %d\n", epoll_wait(ep, &got, 1, 200));
	write(s, "ping", 4);
	int n = epoll_wait(ep, &got, 1, 5000);
	char buf[16] = { 0 };
	int m = read(s, buf, sizeof(buf) - 1);
	printf("epoll in: %d read %d %s\n", n, m, buf);
	return 0;
}

static int do_refused(void)
{
	int err;
	nb_connect(&err);
	return err == ECONNREFUSED ? 0 : 1;
}

#include "inet_udp.h"

static int do_names(void)
{
	int s = tcp_connect();
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	if (getsockname(s, (struct sockaddr *)&a, &l) < 0)
		die("getsockname");
	printf("local %s len %d\n", inet_ntoa(a.sin_addr), (int)l);
	l = sizeof(a);
	if (getpeername(s, (struct sockaddr *)&a, &l) < 0)
		die("getpeername");
	printf("peer %s:%d\n", inet_ntoa(a.sin_addr), ntohs(a.sin_port));
	int v;
	l = sizeof(v);
	getsockopt(s, SOL_SOCKET, SO_TYPE, &v, &l);
	printf("type %s\n", v == SOCK_STREAM ? "stream" : "other");
	getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &l);
	printf("domain %s\n", v == AF_INET ? "inet" : "other");
	v = 1;
	if (setsockopt(s, IPPROTO_TCP, 1 /* TCP_NODELAY */, &v, sizeof(v)) < 0)
		die("setsockopt");
	v = 0;
	l = sizeof(v);
	getsockopt(s, IPPROTO_TCP, 1, &v, &l);
	printf("nodelay %d\n", v);
	return 0;
}

#define PAR_BYTES 200000
#define PAR_MAX 256

static unsigned char par_byte(int conn, int i) { return (unsigned char)(conn * 131 + i * 7 + i / 251); }

static int do_parallel(int n)
{
	if (n < 1 || n > PAR_MAX)
		return 2;
	int fd[PAR_MAX], sent[PAR_MAX] = { 0 }, got[PAR_MAX] = { 0 }, bad = 0, done = 0;
	struct pollfd pf[PAR_MAX];
	for (int c = 0; c < n; c++) {
		fd[c] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd[c] < 0)
			die("socket");
		if (connect(fd[c], (struct sockaddr *)&dest, sizeof(dest)) < 0 && errno != EINPROGRESS)
			die("connect");
	}
	while (done < n) {
		for (int c = 0; c < n; c++) {
			pf[c].fd = got[c] < PAR_BYTES ? fd[c] : -1;
			pf[c].events = POLLIN | (sent[c] < PAR_BYTES ? POLLOUT : 0);
			pf[c].revents = 0;
		}
		if (poll(pf, n, 10000) <= 0)
			die("poll");
		for (int c = 0; c < n; c++) {
			unsigned char buf[16384];
			if (pf[c].revents & POLLOUT) {
				int len = PAR_BYTES - sent[c] < (int)sizeof(buf) ? PAR_BYTES - sent[c] : (int)sizeof(buf);
				for (int i = 0; i < len; i++)
					buf[i] = par_byte(c, sent[c] + i);
				int w = write(fd[c], buf, len);
				if (w > 0)
					sent[c] += w;
				else if (errno != EAGAIN)
					die("write");
			}
			if (pf[c].revents & (POLLIN | POLLHUP | POLLERR)) {
				int r = read(fd[c], buf, sizeof(buf));
				if (r < 0 && errno != EAGAIN)
					die("read");
				if (r == 0) {
					printf("conn %d: early EOF at %d\n", c, got[c]);
					return 1;
				}
				for (int i = 0; i < r; i++)
					if (buf[i] != par_byte(c, got[c] + i))
						bad++;
				if (r > 0) {
					got[c] += r;
					if (got[c] == PAR_BYTES) {
						done++;
						close(fd[c]);
					}
				}
			}
		}
	}
	printf("parallel %d connections, %d bytes each echoed, %d bad bytes\n", n, PAR_BYTES, bad);
	return bad != 0;
}

#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int do_bulk(int mb)
{
	int s = tcp_connect();
	static char buf[1 << 16];
	memset(buf, 'x', sizeof(buf));
	double t0 = now();
	long long total = (long long)mb << 20;
	for (long long off = 0; off < total;) {
		int w = write(s, buf, sizeof(buf));
		if (w <= 0)
			die("write");
		off += w;
	}
	shutdown(s, SHUT_WR);
	char ack[64] = { 0 };
	int n = 0, r;
	while ((r = read(s, ack + n, sizeof(ack) - 1 - n)) > 0)
		n += r;
	double dt = now() - t0;
	printf("bulk %d MB in %.3f s: %.1f MB/s, sink counted %s\n", mb, dt, mb / dt, ack);
	return 0;
}

static int do_rtt(int n)
{
	int s = tcp_connect(), one = 1;
	setsockopt(s, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
	char buf[64];
	memset(buf, 'r', sizeof(buf));
	double t0 = now();
	for (int i = 0; i < n; i++) {
		if (write(s, buf, 64) != 64)
			die("write");
		for (int got = 0; got < 64;) {
			int r = read(s, buf + got, 64 - got);
			if (r <= 0)
				die("read");
			got += r;
		}
	}
	printf("rtt %d round trips of 64 bytes: %.1f us each\n", n, (now() - t0) / n * 1e6);
	return 0;
}

static int do_rebind(int n)
{
	int one = 1, ok = 0;
	for (int listener = 0; listener < 2; listener++) {
		for (int i = 0; i < n; i++) {
			struct sockaddr_in a = dest;
			socklen_t len = sizeof(a);
			int t = socket(AF_INET, SOCK_STREAM, 0);
			if (listener)
				setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			a.sin_port = 0;
			if (bind(t, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(t, (struct sockaddr *)&a, &len) != 0)
				die("bind port 0");
			if (listener && listen(t, 4) != 0)
				die("listen");
			close(t);
			int s = socket(AF_INET, SOCK_STREAM, 0);
			if (listener)
				setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
				printf("rebind %s %d: port %d: %s\n", listener ? "listener" : "socket", i, ntohs(a.sin_port), strerror(errno));
				return 1;
			}
			if (listener && listen(s, 4) != 0)
				die("listen again");
			close(s);
			ok++;
		}
	}
	printf("rebind ok %d\n", ok);
	return 0;
}

static int do_conns(int n)
{
	double t0 = now();
	for (int i = 0; i < n; i++) {
		int s = tcp_connect();
		char c = 'c';
		if (write(s, &c, 1) != 1)
			die("write");
		if (read(s, &c, 1) != 1)
			die("read");
		close(s);
	}
	double dt = now() - t0;
	printf("conns %d in %.3f s: %.1f per s\n", n, dt, n / dt);
	return 0;
}

static int do_hold(int n)
{
	int *s = calloc(n, sizeof(int));
	if (s == NULL)
		die("calloc");
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < n; i++) {
			if (round == 0)
				s[i] = tcp_connect();
			char c = 'a' + i % 26, r = 0;
			if (write(s[i], &c, 1) != 1)
				die("write");
			if (read(s[i], &r, 1) != 1 || r != c)
				die("echo");
		}
		if (round == 0) {
			printf("held %d\n", n);
			char b[64];
			while (read(0, b, sizeof(b)) > 0)
				;
		}
	}
	for (int i = 0; i < n; i++)
		close(s[i]);
	printf("all %d echoed\n", n);
	return 0;
}

static void *server_client(void *arg)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)arg, sizeof(struct sockaddr_in)) < 0)
		die("client connect");
	write(s, "from client", 11);
	char buf[32] = { 0 };
	int n = read(s, buf, sizeof(buf) - 1);
	printf("client got %d '%s'\n", n, buf);
	close(s);
	return NULL;
}

static void *late_client(void *arg)
{
	usleep(200000);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)arg, sizeof(struct sockaddr_in)) < 0)
		die("client connect");
	close(s);
	return NULL;
}

static int do_server(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&dest, sizeof(dest)) < 0)
		die("bind");
	if (listen(l, 8) < 0)
		die("listen");
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	getsockname(l, (struct sockaddr *)&a, &al);
	printf("listening on %s, port %s\n", inet_ntoa(a.sin_addr), ntohs(a.sin_port) ? "set" : "0");
	int fl = fcntl(l, F_GETFL);
	fcntl(l, F_SETFL, fl | O_NONBLOCK);
	int r = accept(l, NULL, NULL);
	printf("accept with nobody: %d %s\n", r, r < 0 ? strerror(errno) : "");
	struct pollfd pf = { l, POLLIN, 0 };
	printf("poll idle: %d\n", poll(&pf, 1, 100));
	fcntl(l, F_SETFL, fl);
	pthread_t c;
	static struct sockaddr_in at;
	at = dest;
	at.sin_port = a.sin_port;
	pthread_create(&c, NULL, server_client, &at);
	pf.revents = 0;
	int pn = poll(&pf, 1, 5000);
	printf("poll pending: %d %s\n", pn, pf.revents & POLLIN ? "IN" : "-");
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	int s = accept4(l, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
	if (s < 0)
		die("accept4");
	printf("accepted from %s len %d cloexec %d\n", inet_ntoa(peer.sin_addr), (int)pl, (fcntl(s, F_GETFD) & FD_CLOEXEC) != 0);
	char buf[32] = { 0 };
	int n = read(s, buf, sizeof(buf) - 1);
	printf("server got %d '%s'\n", n, buf);
	write(s, "from server", 11);
	pthread_join(c, NULL);
	/* A blocking accept: the next client comes after a moment. */
	pthread_create(&c, NULL, late_client, &at);
	int s2 = accept(l, NULL, NULL);
	printf("blocking accept: %s\n", s2 >= 0 ? "ok" : strerror(errno));
	pthread_join(c, NULL);
	return 0;
}

#include "inet_edges.h"

static int do_serve(int n)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (l < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&dest, sizeof(dest)) < 0)
		die("bind");
	if (listen(l, 8) < 0)
		die("listen");
	printf("listening\n");
	for (int i = 0; i < n; i++) {
		struct sockaddr_in peer;
		socklen_t len = sizeof(peer);
		int c = accept(l, (struct sockaddr *)&peer, &len);
		if (c < 0)
			die("accept");
		char buf[65536], line[64];
		long total = 0;
		ssize_t m;
		while ((m = read(c, buf, sizeof(buf))) > 0) {
			for (ssize_t off = 0; off < m;) {
				ssize_t w = write(c, buf + off, m - off);
				if (w <= 0)
					die("write");
				off += w;
			}
			total += m;
		}
		if (m < 0)
			die("read");
		int k = snprintf(line, sizeof(line), "served %ld bytes\n", total);
		if (write(c, line, k) != k)
			die("write");
		close(c);
		printf("connection %d from %s: %ld bytes echoed\n", i, inet_ntoa(peer.sin_addr), total);
	}
	return 0;
}

static int do_userve(int n)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		die("socket");
	if (bind(s, (struct sockaddr *)&dest, sizeof(dest)) < 0)
		die("bind");
	printf("listening\n");
	for (int i = 0; i < n; i++) {
		struct sockaddr_in peer;
		socklen_t len = sizeof(peer);
		char buf[2048];
		memcpy(buf, "re:", 3);
		ssize_t m = recvfrom(s, buf + 3, sizeof(buf) - 3, 0, (struct sockaddr *)&peer, &len);
		if (m < 0)
			die("recvfrom");
		if (sendto(s, buf, m + 3, 0, (struct sockaddr *)&peer, len) != m + 3)
			die("sendto");
		printf("datagram %d from %s: '%.*s'\n", i, inet_ntoa(peer.sin_addr), (int)m, buf + 3);
	}
	return 0;
}

static int do_http(const char *name, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	int e = getaddrinfo(name, port, &hints, &res);
	if (e) {
		printf("getaddrinfo %s: %s\n", name, gai_strerror(e));
		return 1;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)res->ai_addr;
	printf("resolved %s to %s\n", name, inet_ntoa(a->sin_addr));
	dest = *a;
	int s = tcp_connect();
	char req[256], buf[4096];
	int k = snprintf(req, sizeof(req), "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", name);
	if (write(s, req, k) != k)
		die("write");
	ssize_t m;
	while ((m = read(s, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, m, stdout);
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 4 && !strcmp(argv[1], "http"))
		return do_http(argv[2], argv[3]);
	if (argc == 5 && (!strcmp(argv[1], "parallel") || !strcmp(argv[1], "bulk") || !strcmp(argv[1], "rtt") || !strcmp(argv[1], "conns") || !strcmp(argv[1], "hold") ||
			   !strcmp(argv[1], "rebind") ||
			   !strcmp(argv[1], "serve") || !strcmp(argv[1], "userve")))
		argc = 4;
	if (argc != 4) {
		fprintf(stderr, "usage: inet poll|epoll|refused|udp|names ADDR PORT, inet parallel ADDR PORT N\n");
		return 2;
	}
	dest.sin_family = AF_INET;
	dest.sin_port = htons(atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &dest.sin_addr) != 1)
		return 2;
	if (!strcmp(argv[1], "poll"))
		return do_poll();
	if (!strcmp(argv[1], "epoll"))
		return do_epoll();
	if (!strcmp(argv[1], "refused"))
		return do_refused();
	if (!strcmp(argv[1], "udp"))
		return do_udp();
	if (!strcmp(argv[1], "udperr"))
		return do_udperr();
	if (!strcmp(argv[1], "names"))
		return do_names();
	if (!strcmp(argv[1], "server"))
		return do_server();
	if (!strcmp(argv[1], "bulk"))
		return do_bulk(atoi(argv[4]));
	if (!strcmp(argv[1], "rtt"))
		return do_rtt(atoi(argv[4]));
	if (!strcmp(argv[1], "conns"))
		return do_conns(atoi(argv[4]));
	if (!strcmp(argv[1], "udpempty"))
		return do_udpempty();
	if (!strcmp(argv[1], "unconnected"))
		return do_unconnected();
	if (!strcmp(argv[1], "sndbuf"))
		return do_sndbuf();
	if (!strcmp(argv[1], "resetblocked"))
		return do_resetblocked();
	if (!strcmp(argv[1], "unreadclose"))
		return do_unreadclose();
	if (!strcmp(argv[1], "writeafterfin"))
		return do_writeafterfin();
	if (!strcmp(argv[1], "closedlistener"))
		return do_closedlistener();
	if (!strcmp(argv[1], "readall"))
		return do_readall();
	if (!strcmp(argv[1], "urgent"))
		return do_urgent();
	if (!strcmp(argv[1], "rebind"))
		return do_rebind(atoi(argv[4]));
	if (!strcmp(argv[1], "parallel"))
		return do_parallel(atoi(argv[4]));
	if (!strcmp(argv[1], "hold"))
		return do_hold(atoi(argv[4]));
	if (!strcmp(argv[1], "serve"))
		return do_serve(atoi(argv[4]));
	if (!strcmp(argv[1], "userve"))
		return do_userve(atoi(argv[4]));
	if (!strcmp(argv[1], "acceptsig"))
		return do_acceptsig();
	if (!strcmp(argv[1], "connectsig"))
		return do_connectsig();
	if (!strcmp(argv[1], "reset"))
		return do_reset();
	if (!strcmp(argv[1], "rreset"))
		return do_rreset();
	if (!strcmp(argv[1], "connerr"))
		return do_connerr();
	if (!strcmp(argv[1], "errqueue"))
		return do_errqueue();
	if (!strcmp(argv[1], "atmark"))
		return do_atmark();
	return 2;
}
