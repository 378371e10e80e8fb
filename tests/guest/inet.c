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

static int do_udp(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		die("socket");
	for (int i = 0; i < 3; i++) {
		char msg[32], buf[64] = { 0 };
		snprintf(msg, sizeof(msg), "datagram %d", i);
		if (sendto(s, msg, strlen(msg), 0, (struct sockaddr *)&dest, sizeof(dest)) < 0)
			die("sendto");
		struct pollfd pf = { s, POLLIN, 0 };
		if (i < 2 && poll(&pf, 1, 5000) != 1) /* the last recvfrom waits */
			die("poll");
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		int n = recvfrom(s, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&from, &fl);
		if (n < 0)
			die("recvfrom");
		printf("reply %d '%s' from %s:%d len %d\n", n, buf, inet_ntoa(from.sin_addr), ntohs(from.sin_port), (int)fl);
	}
	return 0;
}

/* An empty datagram on the loopback, sent with send() on a connected
 * socket (through kbox's pair), then one with data: both arrive, in
 * order. Then the sender shuts down writing: its sends fail (EPIPE), and
 * the socket still receives. */
static int do_udpempty(void)
{
	struct sockaddr_in at = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(at);
	int r = socket(AF_INET, SOCK_DGRAM, 0), s = socket(AF_INET, SOCK_DGRAM, 0);
	if (r < 0 || s < 0 || bind(r, (struct sockaddr *)&at, sizeof(at)) < 0 || getsockname(r, (struct sockaddr *)&at, &al) < 0 ||
	    connect(s, (struct sockaddr *)&at, sizeof(at)) < 0)
		die("setup");
	if (send(s, "", 0, 0) != 0 || send(s, "after", 5, 0) != 5)
		die("send");
	for (int i = 0; i < 2; i++) {
		char buf[16] = { 0 };
		struct pollfd pf = { r, POLLIN, 0 };
		int n = poll(&pf, 1, 5000) == 1 ? recv(r, buf, sizeof(buf) - 1, 0) : -2;
		printf("datagram %d: %d '%s'\n", i, n, n > 0 ? buf : "");
	}
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	getsockname(s, (struct sockaddr *)&sa, &sl);
	shutdown(s, SHUT_WR);
	int n = send(s, "x", 1, MSG_NOSIGNAL);
	printf("send after shutdown: %d %s\n", n, n < 0 ? strerror(errno) : "");
	sendto(r, "back", 4, 0, (struct sockaddr *)&sa, sl);
	char buf[16] = { 0 };
	struct pollfd pf = { s, POLLIN, 0 };
	n = poll(&pf, 1, 5000) == 1 ? recv(s, buf, sizeof(buf) - 1, MSG_DONTWAIT) : -2;
	printf("received after shutdown: %d '%s'\n", n, n > 0 ? buf : "");
	return 0;
}

/* udp_refused sends msg on s (to dest unless connected) and waits for
 * the refusal to make s ready. */
static void udp_refused(int s, const char *msg, int connected)
{
	int n = connected ? send(s, msg, strlen(msg), 0) : sendto(s, msg, strlen(msg), 0, (struct sockaddr *)&dest, sizeof(dest));
	if (n < 0)
		die("send");
	struct pollfd pf = { s, POLLIN, 0 };
	printf("%s: poll %d\n", msg, poll(&pf, 1, 5000));
}

static void udp_recv(int s, const char *what)
{
	char buf[64];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	int n = recvfrom(s, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	printf("%s: %d %s\n", what, n, n < 0 ? strerror(errno) : "");
}

/* struct sock_extended_err (linux/errqueue.h), which musl lacks. */
struct ext_err {
	unsigned int ee_errno;
	unsigned char ee_origin, ee_type, ee_code, ee_pad;
	unsigned int ee_info, ee_data;
};
#define EE_ORIGIN_ICMP 2

static int do_udperr(void)
{
	/* No destination, not connected: EDESTADDRREQ, not a datagram
	 * taken and dropped. */
	int nd = socket(AF_INET, SOCK_DGRAM, 0);
	struct iovec nv = { "x", 1 };
	struct msghdr nm = { .msg_iov = &nv, .msg_iovlen = 1 };
	printf("sendmsg without a destination: %s\n", sendmsg(nd, &nm, 0) < 0 ? strerror(errno) : "sent");
	close(nd);

	int s = socket(AF_INET, SOCK_DGRAM, 0), v = 0;
	socklen_t l = sizeof(v);
	if (s < 0 || connect(s, (struct sockaddr *)&dest, sizeof(dest)) < 0)
		die("connect");
	udp_refused(s, "first", 1);
	udp_recv(s, "recvfrom");
	udp_recv(s, "recvfrom again");
	udp_refused(s, "second", 1);
	getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &l);
	printf("SO_ERROR: %s\n", strerror(v));
	udp_recv(s, "recvfrom after SO_ERROR");
	/* Refusal after refusal: the socket stays usable through them all. */
	int refused = 0;
	for (int i = 0; i < 100; i++) {
		char b[8];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		struct pollfd pf = { s, POLLIN, 0 };
		if (send(s, "r", 1, 0) < 0 && errno != ECONNREFUSED)
			die("send");
		if (poll(&pf, 1, 5000) == 1 && recvfrom(s, b, sizeof(b), MSG_DONTWAIT, (struct sockaddr *)&from, &fl) < 0 && errno == ECONNREFUSED)
			refused++;
	}
	printf("100 more: %d refused\n", refused);
	close(s);

	int u = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	if (setsockopt(u, IPPROTO_IP, IP_RECVERR, &one, sizeof(one)) < 0)
		die("IP_RECVERR");
	udp_refused(u, "third", 0);
	char data[64] = { 0 }, ctl[512];
	struct sockaddr_in to;
	struct iovec iov = { data, sizeof(data) - 1 };
	struct msghdr mh = { .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	int n = recvmsg(u, &mh, MSG_ERRQUEUE);
	if (n < 0)
		die("recvmsg MSG_ERRQUEUE");
	printf("errqueue: %d '%s' to port match %d flags%s\n", n, data, to.sin_port == dest.sin_port,
	       mh.msg_flags & MSG_ERRQUEUE ? " ERRQUEUE" : "");
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR)
			continue;
		struct ext_err *ee = (struct ext_err *)CMSG_DATA(c);
		printf("extended error: %s origin %s type %d code %d\n", strerror(ee->ee_errno),
		       ee->ee_origin == EE_ORIGIN_ICMP ? "icmp" : "other", ee->ee_type, ee->ee_code);
	}
	n = recvmsg(u, &mh, MSG_ERRQUEUE);
	printf("errqueue again: %d %s\n", n, n < 0 ? strerror(errno) : "");
	udp_recv(u, "recvfrom after the error queue");
	return 0;
}

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

static void on_alarm(int sig) { (void)sig; }

/* alarm_in sends SIGALRM in ms milliseconds, with a handler that does not
 * restart calls. */
static void alarm_in(int ms)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { .it_value = { ms / 1000, (ms % 1000) * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static int listener(int backlog, struct sockaddr_in *at)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die("socket");
	if (bind(l, (struct sockaddr *)&dest, sizeof(dest)) < 0)
		die("bind");
	if (listen(l, backlog) < 0)
		die("listen");
	socklen_t al = sizeof(*at);
	getsockname(l, (struct sockaddr *)at, &al);
	return l;
}

/* loop_pair connects a client to a listener of its own on dest and
 * accepts it: the client's fd; the server's in *server. */
static int listener_fd; /* loop_pair's listener */

static int loop_pair(int *server)
{
	static struct sockaddr_in at;
	int l = listener_fd = listener(8, &at);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&at, sizeof(at)) < 0)
		die("connect");
	if ((*server = accept(l, NULL, NULL)) < 0)
		die("accept");
	return c;
}

static int do_acceptsig(void)
{
	static struct sockaddr_in at;
	int l = listener(8, &at);
	alarm_in(300);
	int r = accept(l, NULL, NULL);
	printf("accept: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	pthread_t c;
	pthread_create(&c, NULL, server_client, &at);
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	int s = accept(l, (struct sockaddr *)&peer, &pl);
	if (s < 0)
		die("accept after the signal");
	printf("accept after: ok from %s\n", inet_ntoa(peer.sin_addr));
	char buf[32] = { 0 };
	int n = read(s, buf, sizeof(buf) - 1);
	printf("server got %d '%s'\n", n, buf);
	write(s, "from server", 11);
	pthread_join(c, NULL);
	return 0;
}

static void connerr_one(int nonblock, const char *what, const struct sockaddr *a, socklen_t al)
{
	int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	int r = connect(s, a, al);
	printf("%s %s: %d %s\n", nonblock ? "non-blocking" : "blocking", what, r, r < 0 ? strerror(errno) : "ok");
	close(s);
}

/* errq_one prints what one read of c's error queue gives. */
static void errq_one(int c, const char *what, int how)
{
	char buf[16];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;
	switch (how) {
	case 0:
		r = recv(c, buf, sizeof(buf), MSG_ERRQUEUE);
		break;
	case 1:
		r = recvfrom(c, buf, sizeof(buf), MSG_ERRQUEUE, NULL, NULL);
		break;
	case 2:
		r = recvfrom(c, buf, sizeof(buf), MSG_ERRQUEUE, (struct sockaddr *)&from, &fl);
		break;
	default:
		r = recvmsg(c, &m, MSG_ERRQUEUE);
	}
	printf("%s: %zd %s\n", what, r, r < 0 ? strerror(errno) : "ok");
}

static int do_errqueue(void)
{
	int server;
	int c = loop_pair(&server);
	const char *how[] = { "recv", "recvfrom", "recvfrom with a source", "recvmsg" };
	for (int i = 0; i < 4; i++)
		errq_one(c, how[i], i);
	write(server, "x", 1);
	usleep(100000);
	for (int i = 0; i < 4; i++) {
		char what[64];
		snprintf(what, sizeof(what), "%s with data waiting", how[i]);
		errq_one(c, what, i);
	}
	char buf[8] = { 0 };
	int n = recv(c, buf, sizeof(buf) - 1, 0);
	printf("then recv: %d '%s'\n", n, buf);
	return 0;
}

static int do_atmark(void)
{
	int at = -1, u = socket(AF_INET, SOCK_DGRAM, 0);
	int r = ioctl(u, SIOCATMARK, &at);
	printf("SIOCATMARK on UDP: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	int server, c = loop_pair(&server);
	r = ioctl(c, SIOCATMARK, &at);
	printf("SIOCATMARK on TCP: %d %s, at the mark %d\n", r, r < 0 ? strerror(errno) : "ok", at);
	return 0;
}

static int do_connerr(void)
{
	static struct sockaddr_in at;
	int l = listener(1, &at);
	struct sockaddr_in bc = { .sin_family = AF_INET, .sin_port = htons(80) };
	bc.sin_addr.s_addr = htonl(INADDR_BROADCAST);
	struct sockaddr_in6 six = { .sin6_family = AF_INET6, .sin6_port = htons(80) };
	for (int nb = 1; nb >= 0; nb--) {
		connerr_one(nb, "broadcast", (struct sockaddr *)&bc, sizeof(bc));
		connerr_one(nb, "short address", (struct sockaddr *)&at, 4);
		connerr_one(nb, "IPv6 address", (struct sockaddr *)&six, sizeof(six));
	}
	/* A failed connect leaves the socket usable: the next one works. */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int r = connect(s, (struct sockaddr *)&bc, sizeof(bc));
	printf("first: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	r = connect(s, (struct sockaddr *)&at, sizeof(at));
	printf("then: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	int a = accept(l, NULL, NULL);
	write(s, "x", 1);
	char c = 0;
	ssize_t n = read(a, &c, 1);
	printf("accepted: %s, read %zd '%c'\n", a >= 0 ? "ok" : strerror(errno), n, c);
	/* A blocking connect refused leaves the socket unconnected: the next
	 * connect is a new one, which checks its address (LTP's connect01). */
	static struct sockaddr_in gone;
	close(listener(1, &gone));
	int u = socket(AF_INET, SOCK_STREAM, 0);
	r = connect(u, (struct sockaddr *)&gone, sizeof(gone));
	printf("refused: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	struct sockaddr_in bogus = gone;
	bogus.sin_family = 47;
	r = connect(u, (struct sockaddr *)&bogus, sizeof(bogus));
	printf("then a bad family: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	/* accept on a datagram socket (LTP's accept01). */
	int d = socket(AF_INET, SOCK_DGRAM, 0);
	r = accept(d, NULL, NULL);
	printf("accept on UDP: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	/* SO_SNDTIMEO limits a blocking connect to a full queue: EINPROGRESS. */
	static struct sockaddr_in at2;
	listener(1, &at2);
	for (int queued = 0;; queued++) {
		int q = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(q, (struct sockaddr *)&at2, sizeof(at2));
		struct pollfd pf = { q, POLLOUT, 0 };
		if (poll(&pf, 1, 500) != 1)
			break;
		if (queued > 8)
			die("the queue never fills");
	}
	int t = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = { 0, 200000 };
	setsockopt(t, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	r = connect(t, (struct sockaddr *)&at2, sizeof(at2));
	printf("connect with SO_SNDTIMEO: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	return 0;
}

static int do_connectsig(void)
{
	static struct sockaddr_in at;
	/* Fill the listener's queue (backlog 1: how many fit differs
	 * between kernels): then a SYN is dropped and retried, so the next
	 * blocking connect waits. */
	int l = listener(1, &at), queued = 0;
	for (;;) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(c, (struct sockaddr *)&at, sizeof(at));
		struct pollfd pf = { c, POLLOUT, 0 };
		if (poll(&pf, 1, 500) != 1) {
			close(c);
			break;
		}
		if (++queued > 8)
			die("the queue never fills");
	}
	int c2 = socket(AF_INET, SOCK_STREAM, 0);
	alarm_in(300);
	int r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("connect: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	int fl = fcntl(c2, F_GETFL);
	fcntl(c2, F_SETFL, fl | O_NONBLOCK);
	r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("non-blocking connect again: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	fcntl(c2, F_SETFL, fl);
	struct pollfd pf = { c2, POLLOUT, 0 };
	printf("poll while connecting: %d\n", poll(&pf, 1, 0));
	int a1 = accept(l, NULL, NULL);
	printf("first accepted: %s\n", a1 >= 0 ? "ok" : strerror(errno));
	/* A blocking connect on a connecting socket waits for it. */
	r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("blocking connect again: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	pf.revents = 0;
	int n = poll(&pf, 1, 0);
	printf("poll once connected: %d %s\n", n, ev(pf.revents));
	int err = -1;
	socklen_t el = sizeof(err);
	getsockopt(c2, SOL_SOCKET, SO_ERROR, &err, &el);
	printf("SO_ERROR: %s\n", err ? strerror(err) : "0");
	r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("connect once done: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	/* The server side of c2: after the other queued ones. */
	struct sockaddr_in me, peer;
	socklen_t ml = sizeof(me);
	getsockname(c2, (struct sockaddr *)&me, &ml);
	int a2;
	for (;;) {
		socklen_t pl = sizeof(peer);
		a2 = accept(l, (struct sockaddr *)&peer, &pl);
		if (a2 < 0)
			die("second accept");
		if (peer.sin_port == me.sin_port)
			break;
		close(a2);
	}
	write(c2, "late", 4);
	char buf[16] = { 0 };
	n = read(a2, buf, sizeof(buf) - 1);
	printf("server got %d '%s'\n", n, buf);
	return 0;
}

static int do_reset(void)
{
	int s, c = loop_pair(&s);
	write(s, "last", 4);
	usleep(100000);
	struct linger lg = { 1, 0 };
	setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(s);
	struct pollfd pf = { c, POLLIN, 0 };
	int n = poll(&pf, 1, 5000);
	usleep(200000);
	printf("poll: %d%s\n", n, n == 1 && (pf.revents & POLLIN) ? " IN" : "");
	char buf[16] = { 0 };
	int m = read(c, buf, sizeof(buf) - 1);
	printf("read: %d '%s'\n", m, m > 0 ? buf : "");
	m = read(c, buf, sizeof(buf));
	printf("read after reset: %d %s\n", m, m < 0 ? strerror(errno) : "");
	m = read(c, buf, sizeof(buf));
	printf("read again: %d %s\n", m, m < 0 ? strerror(errno) : "");
	int err = -1;
	socklen_t el = sizeof(err);
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	printf("SO_ERROR: %s\n", err ? strerror(err) : "0");
	return 0;
}

/* TCP urgent data on the loopback: the client's send with MSG_OOB
 * (its last byte urgent), then more; the server's poll says POLLPRI, its
 * read stops at the mark, SIOCATMARK says so, recv(MSG_OOB) takes the
 * byte, the read after it the rest. With SO_OOBINLINE the urgent byte is
 * read in line. Then the same from the server to the client. */
static void urgent_round(int from, int to, const char *who)
{
	char buf[16] = { 0 }, o = 0;
	/* Apart: urgent data that comes while kbox's pump is reading may
	 * reach the guest in line (docs/networking.md, "Urgent data"). */
	if (send(from, "ab", 2, 0) != 2 || usleep(100000) || send(from, "cd", 2, MSG_OOB) != 2 || usleep(100000) ||
	    send(from, "ef", 2, 0) != 2)
		die("send");
	usleep(200000);
	struct pollfd pf = { to, POLLIN | POLLPRI, 0 };
	int n = poll(&pf, 1, 5000), mark = -1;
	printf("%s poll: %d%s%s\n", who, n, pf.revents & POLLIN ? " IN" : "", pf.revents & POLLPRI ? " PRI" : "");
	int m = recv(to, buf, sizeof(buf) - 1, 0);
	ioctl(to, SIOCATMARK, &mark);
	printf("%s read: %d '%s', at mark %d\n", who, m, m > 0 ? buf : "", mark);
	m = recv(to, &o, 1, MSG_OOB);
	printf("%s urgent: %d '%c'\n", who, m, m == 1 ? o : '?');
	memset(buf, 0, sizeof(buf));
	m = recv(to, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	printf("%s read after: %d '%s'\n", who, m, m > 0 ? buf : "");
	m = recv(to, &o, 1, MSG_OOB | MSG_DONTWAIT);
	printf("%s urgent again: %d %s\n", who, m, m < 0 ? strerror(errno) : "");
}

static int do_urgent(void)
{
	int s, c = loop_pair(&s), one = 1;
	urgent_round(c, s, "server");
	urgent_round(s, c, "client");
	setsockopt(s, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
	if (send(c, "gh", 2, MSG_OOB) != 2 || send(c, "ij", 2, 0) != 2)
		die("send");
	char buf[16] = { 0 };
	int got = 0;
	while (got < 4) {
		struct pollfd pf = { s, POLLIN, 0 };
		int m = poll(&pf, 1, 5000) == 1 ? recv(s, buf + got, sizeof(buf) - 1 - got, 0) : -1;
		if (m <= 0)
			break;
		got += m;
	}
	printf("inline: %d '%s'\n", got, buf);
	return 0;
}

/* Reads of a TCP socket before it connects fail at once (Linux:
 * ENOTCONN), blocking or not; nothing waits. Then, with O_NONBLOCK set
 * before connect, a non-blocking connect to a listener of its own, poll
 * for POLLOUT, and an echo both ways. */
static int do_unconnected(void)
{
	static struct sockaddr_in at;
	int l = listener(8, &at);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	char b = 0;
	alarm(5); /* a read that waits is the fault */
	int m = recv(c, &b, 1, 0);
	printf("blocking read before connect: %s\n", m == 0 || (m < 0 && errno == ENOTCONN) ? "at once, nothing" : strerror(errno));
	fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
	m = recv(c, &b, 1, 0);
	printf("non-blocking read before connect: %s\n", m == 0 || (m < 0 && errno == ENOTCONN) ? "at once, nothing" : strerror(errno));
	alarm(0);
	m = connect(c, (struct sockaddr *)&at, sizeof(at));
	printf("connect: %s\n", m < 0 ? strerror(errno) : "0");
	struct pollfd pf = { c, POLLOUT, 0 };
	int n = poll(&pf, 1, 5000);
	printf("poll: %d%s\n", n, pf.revents & POLLOUT ? " OUT" : "");
	int s = accept(l, NULL, NULL);
	if (s < 0 || write(c, "ping", 4) != 4 || read(s, &b, 1) != 1 || write(s, "pong", 4) != 4)
		die("echo");
	char buf[8] = { 0 };
	pf.events = POLLIN;
	poll(&pf, 1, 5000);
	m = read(c, buf, sizeof(buf) - 1);
	printf("still non-blocking: %d, read %d '%s'\n", (fcntl(c, F_GETFL) & O_NONBLOCK) != 0, m, m > 0 ? buf : "");
	/* A receive timeout set before connect holds after it. */
	int t = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = { 0, 200000 };
	setsockopt(t, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(t, (struct sockaddr *)&at, sizeof(at)) < 0 || accept(l, NULL, NULL) < 0)
		die("connect t");
	alarm(5);
	m = read(t, buf, sizeof(buf));
	printf("read with SO_RCVTIMEO set before connect: %d %s\n", m, m < 0 ? strerror(errno) : "");
	return 0;
}

/* Writes to non-blocking socket c until 20 tries in a row over 200 ms
 * would block (the peer reads nothing); what they queued. */
static long fill(int c)
{
	static char chunk[4096];
	long queued = 0;
	for (int idle = 0; idle < 20;) {
		int m = write(c, chunk, sizeof(chunk));
		if (m > 0) {
			queued += m;
			idle = 0;
		} else if (errno == EAGAIN) {
			idle++;
			usleep(10000);
		} else
			die("write");
	}
	return queued;
}

/* A small SO_SNDBUF bounds what a client queues while its peer reads
 * nothing; the peer's close (with unread data: a reset) then fails the
 * client's writes. */
static int do_sndbuf(void)
{
	static struct sockaddr_in at;
	int l = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
	signal(SIGPIPE, SIG_IGN);
	setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	socklen_t al = sizeof(at);
	at.sin_family = AF_INET;
	at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&at, sizeof(at)) < 0 || listen(l, 4) < 0 || getsockname(l, (struct sockaddr *)&at, &al) < 0)
		die("listen");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&at, sizeof(at)) < 0)
		die("connect");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		die("accept");
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	fcntl(c, F_SETFL, O_NONBLOCK);
	static char chunk[4096];
	long queued = fill(c);
	printf("queued while the peer reads nothing: %s\n", queued < 256 * 1024 ? "under 256 KiB" : "256 KiB or more");
	close(s);
	int err = 0;
	for (int i = 0; i < 200 && !err; i++) {
		if (write(c, chunk, sizeof(chunk)) < 0 && errno != EAGAIN)
			err = errno;
		usleep(10000);
	}
	printf("write after the peer's close: %s\n", err == EPIPE || err == ECONNRESET ? "fails" : "goes on");
	return 0;
}

/* Writes after the peer's close, every 10 ms for at most 2 s: the first
 * error they get, or "goes on". */
static const char *writes_after_close(int c)
{
	static char chunk[1024];
	for (int i = 0; i < 200; i++) {
		if (write(c, chunk, sizeof(chunk)) < 0 && errno != EAGAIN)
			return errno == EPIPE || errno == ECONNRESET ? "fail" : strerror(errno);
		usleep(10000);
	}
	return "go on";
}

/* The peer closes with data unread: Linux resets the connection at the
 * close, so the client's writes fail at once. */
static int do_unreadclose(void)
{
	int s, c = loop_pair(&s);
	signal(SIGPIPE, SIG_IGN);
	fcntl(c, F_SETFL, O_NONBLOCK);
	if (write(c, "unread", 6) != 6)
		die("write");
	usleep(100000);
	close(s);
	usleep(100000);
	char b[8];
	int m = read(c, b, sizeof(b));
	printf("read after the peer's close with data unread: %d %s\n", m, m < 0 ? strerror(errno) : "");
	printf("writes after it: %s\n", writes_after_close(c));
	return 0;
}

/* The peer reads everything and closes (a FIN); the client reads EOF,
 * then writes: the first write draws the peer's reset, and the writes
 * after it fail. The peer is on the loopback (PORT 0), or a host server
 * at ADDR PORT that reads 4 bytes and closes. */
static int do_writeafterfin(void)
{
	int s = -1, c = ntohs(dest.sin_port) ? tcp_connect() : loop_pair(&s);
	char b[8];
	signal(SIGPIPE, SIG_IGN);
	fcntl(c, F_SETFL, O_NONBLOCK);
	if (write(c, "read", 4) != 4)
		die("write");
	if (s >= 0) {
		for (int got = 0, k; got < 4; got += k)
			if ((k = read(s, b, 4 - got)) <= 0)
				die("read");
		close(s);
	}
	struct pollfd pf = { c, POLLIN, 0 };
	poll(&pf, 1, 5000);
	int m = read(c, b, sizeof(b));
	printf("read after the peer's close: %d\n", m);
	printf("writes after it: %s\n", writes_after_close(c));
	return 0;
}

static int blocked_fd;
static volatile int blocked_err;

static void *blocked_writer(void *arg)
{
	static char chunk[4096];
	(void)arg;
	while (write(blocked_fd, chunk, sizeof(chunk)) > 0)
		;
	blocked_err = errno;
	return NULL;
}

/* Both ways full, then a reset: a thread blocked in write on the server
 * end, the client writing until its writes would block, then closing
 * with data unread (a reset). The blocked write fails on Linux
 * (ECONNRESET); kbox's pump into the server's full end never saw the
 * reset, and the write waited for ever (test_ssl's
 * test_nonblocking_send hung). */
static int do_resetblocked(void)
{
	int s, c = loop_pair(&s);
	pthread_t w;
	signal(SIGPIPE, SIG_IGN);
	blocked_fd = s;
	pthread_create(&w, NULL, blocked_writer, NULL);
	fcntl(c, F_SETFL, O_NONBLOCK);
	fill(c);
	close(c);
	for (int i = 0; i < 500 && !blocked_err; i++)
		usleep(10000);
	printf("blocked write after the peer's reset: %s\n",
	       blocked_err == ECONNRESET || blocked_err == EPIPE ? "fails" : blocked_err ? strerror(blocked_err) : "still blocked");
	fflush(stdout);
	_exit(0);
}

/* A connect right after the listener's close is refused, 50 times:
 * Linux frees the port at close. */
static int do_closedlistener(void)
{
	int refused = 0;
	for (int i = 0; i < 50; i++) {
		int s, c = loop_pair(&s);
		struct sockaddr_in at;
		socklen_t al = sizeof(at);
		getsockname(s, (struct sockaddr *)&at, &al);
		close(s);
		close(c);
		close(listener_fd);
		int d = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(d, (struct sockaddr *)&at, sizeof(at)) < 0 && errno == ECONNREFUSED)
			refused++;
		close(d);
	}
	printf("connects refused after the listener's close: %d of 50\n", refused);
	return 0;
}

static int do_readall(void)
{
	int s = tcp_connect(), got = 0, m;
	char buf[256] = { 0 };
	while (got < (int)sizeof(buf) - 1 && (m = read(s, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += m;
	printf("read all: %d '%s'\n", got, buf);
	return 0;
}

static int do_rreset(void)
{
	int s = tcp_connect();
	char buf[16];
	int m = read(s, buf, sizeof(buf));
	printf("read: %d %s\n", m, m < 0 ? strerror(errno) : "");
	return 0;
}

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
