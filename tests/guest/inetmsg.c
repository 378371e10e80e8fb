/* Internet sockets' message calls and queues on ADDR (tests/net_test.go,
 * TestNetMessages): the output names no port, so the same program run
 * natively on the host's loopback prints the same.
 *
 *   inetmsg msg ADDR    UDP: sendmmsg to two receivers in one call;
 *                       recvmsg with MSG_PEEK and then for real, the
 *                       source in msg_name, two iovecs; MSG_TRUNC as a
 *                       flag in and out; recvmmsg of three datagrams,
 *                       each with its source and length; MSG_DONTWAIT
 *                       with nothing queued (EAGAIN); a blocking recvmsg
 *                       that waits for a thread's datagram; one
 *                       interrupted by SIGALRM (EINTR); one ended by
 *                       SO_RCVTIMEO (EAGAIN)
 *   inetmsg queue ADDR  FIONREAD of a UDP socket (the first datagram's
 *                       size); FIONREAD of a TCP socket that holds more
 *                       than a unix socketpair can, and SIOCOUTQ of its
 *                       peer: together they are what the peer wrote
 *                       (within 64 KiB: kbox's pump may hold that much)
 *   inetmsg mixed ADDR  UDP from two senders, received with read, readv
 *                       and recv (no source) mixed with recvfrom and
 *                       recvmsg (a source each, checked against the
 *                       datagram, which names its sender): identical
 *                       datagrams from both, MSG_PEEK, truncation
 *   inetmsg share ADDR  forks: three processes share one UDP socket and
 *                       each takes 12 datagrams from two senders (one
 *                       process mixing read and recvfrom); every source
 *                       is checked (forks: seccomp tier only)
 *   inetmsg user ADDR PORT  run as a user other than root: TCP echo and
 *                       UDP echo with a server at ADDR:PORT, bind to port
 *                       80 (EACCES) and to a port >= 1024 (works)
 *   inetmsg cmsg ADDR   ancillary data: IP_PKTINFO, IP_RECVTOS,
 *                       IP_RECVTTL, SO_TIMESTAMPNS and SO_TIMESTAMP on
 *                       received datagrams; sendmsg with IP_TOS, IP_TTL
 *                       and IP_PKTINFO (the source 127.0.0.2); MSG_CTRUNC
 *                       with a short control buffer and with none;
 *                       IPV6_RECVPKTINFO and IPV6_RECVHOPLIMIT on ::1
 *   inetmsg udprate ADDR N  N rounds of a 64-byte sendto and a recvfrom
 *                       with the source on ADDR, then N with read; prints
 *                       µs per round of each (what a datagram costs)
 *   inetmsg unixrecv N  N rounds of a 1-byte write and a recvmsg on a
 *                       unix socketpair; prints ns per round (what
 *                       serving recvmsg under --net costs other sockets)
 *
 * Only share forks: the others run in every tier.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <net/if.h>
#include <time.h>
#include <unistd.h>

#ifndef SIOCINQ
#define SIOCINQ FIONREAD
#endif
#ifndef SIOCOUTQ
#define SIOCOUTQ TIOCOUTQ
#endif

static struct sockaddr_in at;

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(1);
}

/* udp returns a UDP socket bound to ADDR:0 and its address. */
static int udp(struct sockaddr_in *a)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		die("socket");
	if (bind(s, (struct sockaddr *)&at, sizeof(at)) < 0)
		die("bind");
	socklen_t l = sizeof(*a);
	if (getsockname(s, (struct sockaddr *)a, &l) < 0)
		die("getsockname");
	return s;
}

static struct sockaddr_in s1a, s2a;

/* who names a source: which sender, by its port. */
static const char *who(struct sockaddr_in *a, socklen_t l)
{
	if (l != sizeof(*a) || a->sin_family != AF_INET)
		return "unknown";
	if (a->sin_port == s1a.sin_port && a->sin_addr.s_addr == s1a.sin_addr.s_addr)
		return "s1";
	if (a->sin_port == s2a.sin_port && a->sin_addr.s_addr == s2a.sin_addr.s_addr)
		return "s2";
	return "other";
}

static void waitin(int s)
{
	struct pollfd pf = { s, POLLIN, 0 };
	if (poll(&pf, 1, 5000) != 1)
		die("poll");
}

static void on_alarm(int sig) { (void)sig; }

static int late_fd;
static struct sockaddr_in late_to;

static void *late_send(void *arg)
{
	(void)arg;
	usleep(300 * 1000);
	sendto(late_fd, "late", 4, 0, (struct sockaddr *)&late_to, sizeof(late_to));
	return NULL;
}

static int do_msg(void)
{
	struct sockaddr_in r1a, r2a;
	int r1 = udp(&r1a), r2 = udp(&r2a), s1 = udp(&s1a), s2 = udp(&s2a);

	/* sendmmsg: four datagrams, two destinations, one call. */
	const char *text[4] = { "one", "two", "three", "four" };
	struct sockaddr_in *to[4] = { &r1a, &r2a, &r1a, &r2a };
	struct mmsghdr mm[4];
	struct iovec iv[4];
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < 4; i++) {
		iv[i].iov_base = (void *)text[i];
		iv[i].iov_len = strlen(text[i]);
		mm[i].msg_hdr.msg_iov = &iv[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		mm[i].msg_hdr.msg_name = to[i];
		mm[i].msg_hdr.msg_namelen = sizeof(*to[i]);
	}
	int n = sendmmsg(s1, mm, 4, 0);
	printf("sendmmsg: %d lens %u %u %u %u\n", n, mm[0].msg_len, mm[1].msg_len, mm[2].msg_len, mm[3].msg_len);

	/* recvmsg with MSG_PEEK, then for real into two iovecs. */
	waitin(r1);
	char a[8], b[8];
	struct sockaddr_in from;
	struct iovec two[2] = { { a, 2 }, { b, sizeof(b) } };
	struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = two, .msg_iovlen = 2 };
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	n = recvmsg(r1, &mh, MSG_PEEK);
	printf("r1 peek: %d '%.2s' '%s' from %s %s namelen %d\n", n, a, b, who(&from, mh.msg_namelen), inet_ntoa(from.sin_addr),
	       (int)mh.msg_namelen);
	memset(&from, 0, sizeof(from));
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	mh.msg_namelen = sizeof(from);
	mh.msg_flags = -1;
	n = recvmsg(r1, &mh, 0);
	printf("r1 recvmsg: %d '%.2s' '%s' from %s namelen %d flags %d controllen %d\n", n, a, b, who(&from, mh.msg_namelen),
	       (int)mh.msg_namelen, mh.msg_flags, (int)mh.msg_controllen);

	/* A short name buffer: what fits, the full length. */
	waitin(r1);
	memset(&from, 0, sizeof(from));
	struct iovec one = { a, sizeof(a) };
	memset(a, 0, sizeof(a));
	struct msghdr sh = { .msg_name = &from, .msg_namelen = 4, .msg_iov = &one, .msg_iovlen = 1 };
	n = recvmsg(r1, &sh, 0);
	printf("r1 short name: %d '%s' namelen %d family %s port %s\n", n, a, (int)sh.msg_namelen,
	       from.sin_family == AF_INET ? "inet" : "none", from.sin_port == s1a.sin_port ? "s1" : "unset");

	/* MSG_TRUNC out (msg_flags) and in (the full length). */
	waitin(r2);
	struct iovec tiny = { a, 2 };
	struct msghdr th = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &tiny, .msg_iovlen = 1 };
	n = recvmsg(r2, &th, 0);
	printf("r2 truncated: %d flags %s from %s\n", n, th.msg_flags & MSG_TRUNC ? "MSG_TRUNC" : "none",
	       who(&from, th.msg_namelen));
	waitin(r2);
	th.msg_namelen = sizeof(from);
	n = recvmsg(r2, &th, MSG_TRUNC);
	printf("r2 MSG_TRUNC: %d flags %s from %s\n", n, th.msg_flags & MSG_TRUNC ? "MSG_TRUNC" : "none", who(&from, th.msg_namelen));

	/* recvmmsg: three datagrams from two senders; the call waits for
	 * all three. */
	sendto(s2, "alpha", 5, 0, (struct sockaddr *)&r1a, sizeof(r1a));
	sendto(s1, "beta", 4, 0, (struct sockaddr *)&r1a, sizeof(r1a));
	sendto(s2, "gamma!", 6, 0, (struct sockaddr *)&r1a, sizeof(r1a));
	struct mmsghdr rm[3];
	struct sockaddr_in rf[3];
	char rb[3][16];
	struct iovec rv[3];
	memset(rm, 0, sizeof(rm));
	memset(rb, 0, sizeof(rb));
	for (int i = 0; i < 3; i++) {
		rv[i].iov_base = rb[i];
		rv[i].iov_len = sizeof(rb[i]) - 1;
		rm[i].msg_hdr.msg_iov = &rv[i];
		rm[i].msg_hdr.msg_iovlen = 1;
		rm[i].msg_hdr.msg_name = &rf[i];
		rm[i].msg_hdr.msg_namelen = sizeof(rf[i]);
	}
	n = recvmmsg(r1, rm, 3, 0, NULL);
	printf("recvmmsg: %d\n", n);
	for (int i = 0; i < n; i++)
		printf("  %d: %u '%s' from %s\n", i, rm[i].msg_len, rb[i], who(&rf[i], rm[i].msg_hdr.msg_namelen));

	/* Nothing queued. */
	mh.msg_namelen = sizeof(from);
	n = recvmsg(r1, &mh, MSG_DONTWAIT);
	printf("empty MSG_DONTWAIT: %d %s\n", n, n < 0 ? strerror(errno) : "");
	n = recvmmsg(r1, rm, 3, MSG_DONTWAIT, NULL);
	printf("empty recvmmsg MSG_DONTWAIT: %d %s\n", n, n < 0 ? strerror(errno) : "");

	/* A blocking recvmsg waits for a datagram a thread sends later. */
	pthread_t th1;
	late_fd = s2;
	late_to = r2a;
	pthread_create(&th1, NULL, late_send, NULL);
	memset(a, 0, sizeof(a));
	memset(&from, 0, sizeof(from));
	one.iov_len = sizeof(a) - 1;
	struct msghdr lh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &one, .msg_iovlen = 1 };
	n = recvmsg(r2, &lh, 0);
	printf("blocking recvmsg: %d '%s' from %s\n", n, a, who(&from, lh.msg_namelen));
	pthread_join(th1, NULL);

	/* A signal ends a blocking recvmsg (no SA_RESTART): EINTR. */
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { .it_value = { 0, 300 * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	lh.msg_namelen = sizeof(from);
	n = recvmsg(r2, &lh, 0);
	printf("recvmsg and a signal: %d %s\n", n, n < 0 ? strerror(errno) : "");

	/* SO_RCVTIMEO ends a blocking recvmmsg: EAGAIN. */
	struct timeval tv = { 0, 300 * 1000 };
	setsockopt(r2, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recvmmsg(r2, rm, 3, 0, NULL);
	printf("recvmmsg and SO_RCVTIMEO: %d %s\n", n, n < 0 ? strerror(errno) : "");
	return 0;
}

static int do_queue(void)
{
	struct sockaddr_in ra, sa;
	int r = udp(&ra), s = udp(&sa);
	sendto(s, "abc", 3, 0, (struct sockaddr *)&ra, sizeof(ra));
	sendto(s, "defgh", 5, 0, (struct sockaddr *)&ra, sizeof(ra));
	waitin(r);
	usleep(200 * 1000);
	int q = -1;
	if (ioctl(r, FIONREAD, &q) < 0)
		die("FIONREAD udp");
	printf("udp FIONREAD: %d\n", q);
	char buf[8];
	recv(r, buf, sizeof(buf), 0);
	waitin(r);
	ioctl(r, SIOCINQ, &q);
	printf("udp SIOCINQ after one: %d\n", q);
	recv(r, buf, sizeof(buf), 0);
	ioctl(r, FIONREAD, &q);
	printf("udp FIONREAD empty: %d\n", q);

	/* TCP: the writer fills everything (the reader reads nothing). */
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in la;
	socklen_t ll = sizeof(la);
	if (l < 0 || bind(l, (struct sockaddr *)&at, sizeof(at)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&la, &ll) < 0)
		die("listener");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&la, sizeof(la)) < 0)
		die("connect");
	int a = accept(l, NULL, NULL);
	if (a < 0)
		die("accept");
	if (ioctl(l, FIONREAD, &q) < 0)
		printf("listener FIONREAD: %s\n", strerror(errno));
	ioctl(a, FIONREAD, &q);
	printf("tcp FIONREAD before: %d\n", q);
	fcntl(c, F_SETFL, O_NONBLOCK);
	static char chunk[65536];
	memset(chunk, 'x', sizeof(chunk));
	long written = 0;
	for (int idle = 0; idle < 3;) {
		ssize_t w = write(c, chunk, sizeof(chunk));
		if (w > 0) {
			written += w;
			idle = 0;
			continue;
		}
		if (errno != EAGAIN)
			die("write");
		idle++;
		usleep(200 * 1000);
	}
	/* Settled: the same counts twice in a row. */
	int inq = -1, outq = -1;
	for (int i = 0; i < 50; i++) {
		int in2, out2;
		ioctl(a, FIONREAD, &in2);
		ioctl(c, SIOCOUTQ, &out2);
		if (in2 == inq && out2 == outq)
			break;
		inq = in2, outq = out2;
		usleep(100 * 1000);
	}
	printf("tcp wrote more than a socketpair holds: %s\n", written > 1000000 ? "yes" : "no");
	/* Linux's sum is exact; kbox's pump may hold up to 64 KiB unseen. */
	long d = written - inq - outq;
	printf("tcp FIONREAD + SIOCOUTQ within 64 KiB of written: %s\n", d >= 0 && d <= 65536 ? "yes" : "no");
	if (d != 0)
		fprintf(stderr, "written %ld FIONREAD %d SIOCOUTQ %d\n", written, inq, outq);
	/* Read it all: then both are 0. */
	fcntl(a, F_SETFL, O_NONBLOCK);
	long got = 0;
	for (int idle = 0; idle < 3 && got < written;) {
		ssize_t m = read(a, chunk, sizeof(chunk));
		if (m > 0) {
			got += m;
			idle = 0;
			continue;
		}
		idle++;
		usleep(100 * 1000);
	}
	usleep(200 * 1000);
	ioctl(a, FIONREAD, &inq);
	ioctl(c, SIOCOUTQ, &outq);
	printf("tcp read all: %s, FIONREAD %d SIOCOUTQ %d\n", got == written ? "yes" : "no", inq, outq);
	return 0;
}

/* sender names the sender of datagram text t: "s1" or "s2" (its first
 * two bytes), "?" if neither. */
static const char *sender(const char *t, int n)
{
	if (n >= 2 && t[0] == 's' && t[1] == '1')
		return "s1";
	if (n >= 2 && t[0] == 's' && t[1] == '2')
		return "s2";
	return "?";
}

static int mixed_bad;

/* got prints one received datagram; a source, if given, must be the
 * datagram's sender. */
static void got(const char *how, char *b, int n, struct sockaddr_in *from, socklen_t fl)
{
	if (n < 0) {
		printf("%s: %s\n", how, strerror(errno));
		mixed_bad++;
		return;
	}
	if (!from) {
		printf("%s: %d '%.*s'\n", how, n, n, b);
		return;
	}
	const char *w = who(from, fl);
	int right = !strcmp(w, sender(b, n)) || (n >= 4 && !memcmp(b, "same", 4));
	printf("%s: %d '%.*s' from %s%s\n", how, n, n, b, w, right ? "" : " WRONG");
	if (!right)
		mixed_bad++;
}

static int do_mixed(void)
{
	struct sockaddr_in ra;
	int r = udp(&ra), s1 = udp(&s1a), s2 = udp(&s2a);
	struct sockaddr *to = (struct sockaddr *)&ra;
	char b[64];
	struct sockaddr_in from;
	socklen_t fl;
	int n;

	/* Rounds of read, then recvfrom, then recv, then recvmsg. */
	for (int i = 0; i < 4; i++) {
		char t[16];
		snprintf(t, sizeof(t), "s1 %d", i);
		sendto(s1, t, strlen(t), 0, to, sizeof(ra));
		snprintf(t, sizeof(t), "s2 %d!", i);
		sendto(s2, t, strlen(t), 0, to, sizeof(ra));
	}
	for (int i = 0; i < 2; i++) {
		n = read(r, b, sizeof(b));
		got("read", b, n, NULL, 0);
		fl = sizeof(from);
		n = recvfrom(r, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
		got("recvfrom", b, n, &from, fl);
		n = recv(r, b, sizeof(b), 0);
		got("recv", b, n, NULL, 0);
		struct iovec iv = { b, sizeof(b) };
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iv, .msg_iovlen = 1 };
		n = recvmsg(r, &mh, 0);
		got("recvmsg", b, n, &from, mh.msg_namelen);
	}

	/* The same bytes from both senders: read takes s1's, recvfrom must
	 * say s2 (the bytes alone cannot tell). */
	sendto(s1, "same", 4, 0, to, sizeof(ra));
	sendto(s2, "same", 4, 0, to, sizeof(ra));
	sendto(s1, "same", 4, 0, to, sizeof(ra));
	n = read(r, b, sizeof(b));
	got("read same", b, n, NULL, 0);
	waitin(r);
	fl = sizeof(from);
	n = recvfrom(r, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	printf("recvfrom same: %d from %s\n", n, who(&from, fl));
	if (strcmp(who(&from, fl), "s2"))
		mixed_bad++;
	fl = sizeof(from);
	n = recvfrom(r, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	printf("recvfrom same again: %d from %s\n", n, who(&from, fl));
	if (strcmp(who(&from, fl), "s1"))
		mixed_bad++;

	/* MSG_PEEK between reads; readv; a truncating read. */
	sendto(s1, "s1 peek", 7, 0, to, sizeof(ra));
	sendto(s2, "s2 long datagram, truncated", 27, 0, to, sizeof(ra));
	sendto(s1, "s1 after", 8, 0, to, sizeof(ra));
	sendto(s2, "s2 last", 7, 0, to, sizeof(ra));
	waitin(r);
	fl = sizeof(from);
	n = recvfrom(r, b, sizeof(b), MSG_PEEK, (struct sockaddr *)&from, &fl);
	got("recvfrom peek", b, n, &from, fl);
	char v1[3], v2[8];
	struct iovec vv[2] = { { v1, sizeof(v1) }, { v2, sizeof(v2) } };
	n = readv(r, vv, 2);
	printf("readv: %d '%.3s' '%.*s'\n", n, v1, n > 3 ? n - 3 : 0, v2);
	n = read(r, b, 4);
	got("read 4 of 27", b, n, NULL, 0);
	waitin(r);
	fl = sizeof(from);
	n = recvfrom(r, b, 2, 0, (struct sockaddr *)&from, &fl);
	got("recvfrom 2 of 8", b, n, &from, fl);
	fl = sizeof(from);
	n = recvfrom(r, b, sizeof(b), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	if (n < 0) {
		waitin(r);
		fl = sizeof(from);
		n = recvfrom(r, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	}
	got("recvfrom last", b, n, &from, fl);
	printf("mixed: %s\n", mixed_bad ? "WRONG SOURCES" : "every source right");
	return mixed_bad != 0;
}

/* share_take takes k datagrams from r, each source checked; mix: every
 * other one with read. */
static void share_take(const char *name, int r, int k, int mix)
{
	int bad = 0, checked = 0;
	struct timeval tv = { 10, 0 };
	setsockopt(r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (int i = 0; i < k; i++) {
		char b[32];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		int n;
		if (mix && i % 2) {
			n = read(r, b, sizeof(b));
		} else {
			n = recvfrom(r, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
			if (n >= 0) {
				checked++;
				if (strcmp(who(&from, fl), sender(b, n))) {
					bad++;
					fprintf(stderr, "%s: '%.*s' from %s\n", name, n, b, who(&from, fl));
				}
			}
		}
		if (n < 0) {
			printf("%s: %s after %d\n", name, strerror(errno), i);
			return;
		}
	}
	printf("%s: %d datagrams, %d sources checked, %s\n", name, k, checked, bad ? "WRONG SOURCES" : "all right");
}

static int do_share(void)
{
	enum { K = 12 };
	struct sockaddr_in ra;
	int r = udp(&ra), s1 = udp(&s1a), s2 = udp(&s2a);
	int go[2];
	if (pipe(go) < 0)
		die("pipe");
	fflush(stdout);
	pid_t kids[2];
	for (int c = 0; c < 2; c++) {
		kids[c] = fork();
		if (kids[c] < 0)
			die("fork");
		if (kids[c] == 0) {
			close(go[1]);
			char x;
			read(go[0], &x, 1);
			share_take(c ? "child 2 (read and recvfrom)" : "child 1", r, K, c);
			fflush(stdout);
			_exit(0);
		}
	}
	close(go[0]);
	close(go[1]); /* the children start */
	for (int i = 0; i < 3 * K / 2; i++) {
		char t[16];
		snprintf(t, sizeof(t), "s1 %d", i);
		sendto(s1, t, strlen(t), 0, (struct sockaddr *)&ra, sizeof(ra));
		snprintf(t, sizeof(t), "s2 %d..", i);
		sendto(s2, t, strlen(t), 0, (struct sockaddr *)&ra, sizeof(ra));
		if (i % 3 == 2)
			usleep(20 * 1000);
	}
	share_take("parent", r, K, 0);
	for (int c = 0; c < 2; c++)
		waitpid(kids[c], NULL, 0);
	return 0;
}

static int do_user(const char *port)
{
	struct sockaddr_in srv = at;
	srv.sin_port = htons(atoi(port));
	printf("uid %d euid %d\n", (int)getuid(), (int)geteuid());

	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&srv, sizeof(srv)) < 0)
		die("tcp connect");
	char b[32];
	int n = write(c, "tcp as a user", 13);
	int m = 0;
	while (m < n) {
		int k = read(c, b + m, sizeof(b) - m);
		if (k <= 0)
			break;
		m += k;
	}
	printf("tcp echo: %d '%.*s'\n", m, m, b);
	close(c);

	int u = socket(AF_INET, SOCK_DGRAM, 0);
	if (u < 0)
		die("udp socket");
	sendto(u, "udp as a user", 13, 0, (struct sockaddr *)&srv, sizeof(srv));
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	struct timeval tv = { 5, 0 };
	setsockopt(u, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recvfrom(u, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	if (n < 0)
		die("udp recvfrom");
	printf("udp echo: %d '%.*s' from the server: %s\n", n, n, b,
	       from.sin_port == srv.sin_port && from.sin_addr.s_addr == srv.sin_addr.s_addr ? "yes" : "no");
	close(u);

	struct sockaddr_in low = { .sin_family = AF_INET, .sin_port = htons(80) };
	int l = socket(AF_INET, SOCK_DGRAM, 0);
	n = bind(l, (struct sockaddr *)&low, sizeof(low));
	printf("bind port 80: %d %s\n", n, n < 0 ? strerror(errno) : "");
	close(l);
	int t = socket(AF_INET, SOCK_STREAM, 0);
	n = bind(t, (struct sockaddr *)&low, sizeof(low));
	printf("bind tcp port 80: %d %s\n", n, n < 0 ? strerror(errno) : "");
	close(t);
	low.sin_port = htons(5353);
	l = socket(AF_INET, SOCK_DGRAM, 0);
	n = bind(l, (struct sockaddr *)&low, sizeof(low));
	printf("bind port 5353: %d %s\n", n, n < 0 ? strerror(errno) : "");
	/* UDP on the guest's own loopback, to the socket bound above. */
	low.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	sendto(s, "s1 local", 8, 0, (struct sockaddr *)&low, sizeof(low));
	setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	fl = sizeof(from);
	n = recvfrom(l, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	getsockname(s, (struct sockaddr *)&sa, &sl);
	printf("local udp: %d '%.*s' from the sender: %s\n", n, n > 0 ? n : 0, b,
	       n > 0 && from.sin_port == sa.sin_port ? "yes" : "no");
	return 0;
}

#include "inetmsg_cmsg.h"

static int do_udprate(int n)
{
	struct sockaddr_in ra, sa;
	int r = udp(&ra), s = udp(&sa);
	char b[64] = "rate";
	for (int how = 0; how < 2; how++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < n; i++) {
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			if (sendto(s, b, sizeof(b), 0, (struct sockaddr *)&ra, sizeof(ra)) != sizeof(b))
				die("sendto");
			int m = how ? read(r, b, sizeof(b)) : recvfrom(r, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
			if (m != sizeof(b))
				die("receive");
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
		printf("%s: %.1f us per round\n", how ? "read" : "recvfrom", us);
	}
	return 0;
}

static int do_unixrecv(int n)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		die("socketpair");
	char c = 'x', b;
	struct iovec iv = { &b, 1 };
	struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		if (write(sv[0], &c, 1) != 1 || recvmsg(sv[1], &mh, 0) != 1)
			die("round");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("%.0f ns per write+recvmsg\n", ns / n);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 3 && !strcmp(argv[1], "unixrecv"))
		return do_unixrecv(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "udprate")) {
		at.sin_family = AF_INET;
		if (inet_pton(AF_INET, argv[2], &at.sin_addr) != 1)
			return 2;
		return do_udprate(atoi(argv[3]));
	}
	if (argc != 3 && !(argc == 4 && !strcmp(argv[1], "user"))) {
		fprintf(stderr, "usage: inetmsg msg|queue|mixed|share ADDR | user ADDR PORT\n");
		return 2;
	}
	at.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[2], &at.sin_addr) != 1)
		return 2;
	if (!strcmp(argv[1], "msg"))
		return do_msg();
	if (!strcmp(argv[1], "queue"))
		return do_queue();
	if (!strcmp(argv[1], "cmsg"))
		return do_cmsg();
	if (!strcmp(argv[1], "mixed"))
		return do_mixed();
	if (!strcmp(argv[1], "share"))
		return do_share();
	if (!strcmp(argv[1], "user"))
		return do_user(argv[3]);
	return 2;
}
