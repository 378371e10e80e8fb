/* sockerr: socket calls whose errors and behaviour LTP checks (send01,
 * send02, sendmsg01, accept03, socket01), on the guest's own loopback
 * (tests/sockerr_test.go, TestSockErrors). The output names no port or
 * fd, so the same program run natively prints the same.
 *
 *   sockerr udpbig   a connected UDP socket: send of 128 KiB, send and
 *                    write of 65509 bytes (EMSGSIZE, over IPv4's 65507),
 *                    sendto with an address of 65508 (EMSGSIZE), send of
 *                    65507 (received whole); the same over IPv6 (65527)
 *   sockerr more     MSG_MORE holds data back: TCP send, UDP send,
 *                    sendto and sendmsg; 16 bytes with MSG_MORE are not
 *                    received, the next byte without it sends all 17
 *   sockerr tcpnc    an unconnected TCP socket: sendmsg with and without
 *                    an address, sendto with one (EPIPE each)
 *   sockerr rights DIR  sendmsg with an address and SCM_RIGHTS on an
 *                    unconnected unix datagram socket (bound at DIR/s):
 *                    sent, and the fd received reads the file
 *   sockerr opath    socket calls on an O_PATH fd: EBADF each
 *   sockerr socktype socket(2) of internet types past SOCK_PACKET or
 *                    with unknown flags (EINVAL), as socket01's
 *
 * Each prints one line a case: what the call returned.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(1);
}

/* res prints what a call gave: its value, or -1 and the errno's name. */
static void res(const char *what, long r)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, strerror(errno));
	else
		printf("%s: %ld\n", what, r);
}

/* udp makes a UDP socket of family fam bound to the loopback and one
 * connected to it; the receiver's address goes to *to. */
static void udp(int fam, int *rx, int *tx, struct sockaddr_storage *to, socklen_t *tolen)
{
	*rx = socket(fam, SOCK_DGRAM, 0);
	*tx = socket(fam, SOCK_DGRAM, 0);
	if (*rx < 0 || *tx < 0)
		die("socket");
	memset(to, 0, sizeof(*to));
	if (fam == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)to;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*tolen = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)to;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		*tolen = sizeof(*a);
	}
	if (bind(*rx, (struct sockaddr *)to, *tolen) < 0)
		die("bind");
	if (getsockname(*rx, (struct sockaddr *)to, tolen) < 0)
		die("getsockname");
	if (connect(*tx, (struct sockaddr *)to, *tolen) < 0)
		die("connect");
}

/* wait1 receives one datagram (or stream chunk) on fd, waiting up to 2 s;
 * -1 and EAGAIN when none came. */
static long wait1(int fd, char *b, size_t n)
{
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return recv(fd, b, n, 0);
}

static int udpbig(void)
{
	static char big[128 << 10], in[128 << 10];
	struct {
		int fam;
		const char *name;
		long max;
	} fams[] = {{AF_INET, "ipv4", 65507}, {AF_INET6, "ipv6", 65527}};
	for (int i = 0; i < 2; i++) {
		int rx, tx;
		struct sockaddr_storage to;
		socklen_t tolen;
		char what[64];
		long max = fams[i].max;
		udp(fams[i].fam, &rx, &tx, &to, &tolen);
		snprintf(what, sizeof(what), "%s send 128 KiB", fams[i].name);
		res(what, send(tx, big, sizeof(big), 0));
		/* max+2: kbox's bound for a plain send is one over
		 * (docs/networking.md, "UDP datagram sizes"). */
		snprintf(what, sizeof(what), "%s send max+2", fams[i].name);
		res(what, send(tx, big, max + 2, 0));
		snprintf(what, sizeof(what), "%s write max+2", fams[i].name);
		res(what, write(tx, big, max + 2));
		snprintf(what, sizeof(what), "%s sendto max+1", fams[i].name);
		res(what, sendto(tx, big, max + 1, 0, (struct sockaddr *)&to, tolen));
		snprintf(what, sizeof(what), "%s send max", fams[i].name);
		res(what, send(tx, big, max, 0));
		snprintf(what, sizeof(what), "%s received", fams[i].name);
		res(what, wait1(rx, in, sizeof(in)));
		snprintf(what, sizeof(what), "%s send 1", fams[i].name);
		res(what, send(tx, big, 1, 0));
		snprintf(what, sizeof(what), "%s received next", fams[i].name);
		res(what, wait1(rx, in, sizeof(in)));
		close(rx);
		close(tx);
	}
	return 0;
}

enum { viaSend, viaSendto, viaSendmsg };

static long sendvia(int how, int fd, const char *b, size_t n, int flags,
		    struct sockaddr_storage *to, socklen_t tolen)
{
	struct iovec iov = {(void *)b, n};
	struct msghdr m = {.msg_name = to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1};
	switch (how) {
	case viaSendto:
		return sendto(fd, b, n, flags, (struct sockaddr *)to, tolen);
	case viaSendmsg:
		return sendmsg(fd, &m, flags);
	}
	return send(fd, b, n, flags);
}

/* corked runs send02's check rounds times: 16 bytes arrive; 16 with
 * MSG_MORE do not (within 100 ms); one more byte without it brings 17. */
static void corked(const char *what, int how, int tx, int rx, struct sockaddr_storage *to,
		   socklen_t tolen, int rounds)
{
	char b[16], in[64];
	memset(b, 'm', sizeof(b));
	for (int i = 0; i < rounds; i++) {
		long n;
		if (sendvia(how, tx, b, 16, 0, to, tolen) != 16 || (n = wait1(rx, in, sizeof(in))) != 16) {
			printf("%s round %d: plain send: %ld %s\n", what, i, n, strerror(errno));
			return;
		}
		if (sendvia(how, tx, b, 16, MSG_MORE, to, tolen) != 16) {
			printf("%s round %d: send MSG_MORE: %s\n", what, i, strerror(errno));
			return;
		}
		usleep(i == 0 ? 100000 : 1000);
		if ((n = recv(rx, in, sizeof(in), MSG_DONTWAIT)) != -1 || errno != EAGAIN) {
			printf("%s round %d: after MSG_MORE got %ld\n", what, i, n);
			return;
		}
		if (sendvia(how, tx, b, 1, 0, to, tolen) != 1 || (n = wait1(rx, in, sizeof(in))) != 17) {
			printf("%s round %d: after the last byte got %ld\n", what, i, n);
			return;
		}
	}
	printf("%s: MSG_MORE held %d rounds\n", what, rounds);
}

static int more(void)
{
	const int rounds = 50;
	struct sockaddr_storage to;
	socklen_t tolen;
	int rx, tx;

	/* TCP: a connection through a listener on the loopback. */
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, al) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		die("listener");
	tx = socket(AF_INET, SOCK_STREAM, 0);
	if (tx < 0 || connect(tx, (struct sockaddr *)&a, al) < 0)
		die("tcp connect");
	rx = accept(l, NULL, NULL);
	if (rx < 0)
		die("accept");
	corked("tcp send", viaSend, tx, rx, NULL, 0, rounds);
	close(rx);
	close(tx);
	close(l);

	const char *names[] = {"udp send", "udp sendto", "udp sendmsg"};
	for (int how = viaSend; how <= viaSendmsg; how++) {
		udp(AF_INET, &rx, &tx, &to, &tolen);
		if (how != viaSend) {
			/* sendto and sendmsg name the receiver on an
			 * unconnected socket, as send02 does. */
			close(tx);
			tx = socket(AF_INET, SOCK_DGRAM, 0);
		}
		corked(names[how], how, tx, rx, &to, how == viaSend ? 0 : tolen, rounds);
		close(rx);
		close(tx);
	}
	return 0;
}

static int tcpnc(void)
{
	signal(SIGPIPE, SIG_IGN);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char b[8] = "abcdefg";
	struct iovec iov = {b, sizeof(b)};
	struct msghdr m = {.msg_name = &a, .msg_namelen = sizeof(a), .msg_iov = &iov, .msg_iovlen = 1};
	if (s < 0)
		die("socket");
	res("sendmsg with an address", sendmsg(s, &m, 0));
	m.msg_name = NULL;
	m.msg_namelen = 0;
	res("sendmsg without one", sendmsg(s, &m, 0));
	res("sendto with an address", sendto(s, b, sizeof(b), 0, (struct sockaddr *)&a, sizeof(a)));
	res("send", send(s, b, sizeof(b), 0));
	return 0;
}

static int rights(const char *dir)
{
	char path[200], file[200], got[32] = {0};
	snprintf(path, sizeof(path), "%s/s", dir);
	snprintf(file, sizeof(file), "%s/f", dir);
	unlink(path);
	int f = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (f < 0 || write(f, "passed file", 11) != 11 || lseek(f, 0, SEEK_SET) != 0)
		die("file");
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	strcpy(un.sun_path, path);
	int rx = socket(AF_UNIX, SOCK_DGRAM, 0), tx = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (rx < 0 || tx < 0 || bind(rx, (struct sockaddr *)&un, sizeof(un)) < 0)
		die("unix bind");

	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	memset(&c, 0, sizeof(c));
	char b[8] = "rights";
	struct iovec iov = {b, sizeof(b)};
	struct msghdr m = {.msg_name = &un, .msg_namelen = sizeof(un), .msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = c.buf, .msg_controllen = CMSG_LEN(sizeof(int))};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_len = CMSG_LEN(sizeof(int));
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	memcpy(CMSG_DATA(h), &f, sizeof(int));
	res("sendmsg SCM_RIGHTS with an address", sendmsg(tx, &m, 0));

	memset(&c, 0, sizeof(c));
	struct msghdr r = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof(c.buf)};
	res("recvmsg", recvmsg(rx, &r, MSG_DONTWAIT));
	h = CMSG_FIRSTHDR(&r);
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
		int fd;
		memcpy(&fd, CMSG_DATA(h), sizeof(int));
		res("received fd reads", read(fd, got, sizeof(got) - 1));
		printf("it holds: %s\n", got);
		close(fd);
	} else {
		printf("no SCM_RIGHTS received\n");
	}
	unlink(path);
	unlink(file);
	return 0;
}

static int opath(void)
{
	int fd = open("/", O_PATH);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int v;
	socklen_t vl = sizeof(v);
	char b[4];
	if (fd < 0)
		die("open O_PATH");
	res("accept", accept(fd, NULL, NULL));
	res("accept4", accept4(fd, NULL, NULL, SOCK_CLOEXEC));
	res("bind", bind(fd, (struct sockaddr *)&a, sizeof(a)));
	res("connect", connect(fd, (struct sockaddr *)&a, sizeof(a)));
	res("listen", listen(fd, 1));
	res("getsockname", getsockname(fd, (struct sockaddr *)&a, &al));
	res("getsockopt", getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl));
	res("sendto", sendto(fd, b, 1, 0, (struct sockaddr *)&a, sizeof(a)));
	res("recv", recv(fd, b, 1, MSG_DONTWAIT));
	res("shutdown", shutdown(fd, SHUT_RDWR));
	return 0;
}

static int socktype(void)
{
	struct {
		const char *what;
		int fam, type, proto;
	} c[] = {
		{"inet type 75", AF_INET, 75, 0},
		{"inet type 11", AF_INET, 11, 0},
		{"inet6 type 15", AF_INET6, 15, 0},
		{"inet stream with flag 0x100", AF_INET, SOCK_STREAM | 0x100, 0},
		{"inet dgram with SOCK_NONBLOCK", AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0},
	};
	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int fd = socket(c[i].fam, c[i].type, c[i].proto);
		res(c[i].what, fd < 0 ? -1 : 0);
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "udpbig"))
		return udpbig();
	if (argc == 2 && !strcmp(argv[1], "more"))
		return more();
	if (argc == 2 && !strcmp(argv[1], "tcpnc"))
		return tcpnc();
	if (argc == 3 && !strcmp(argv[1], "rights"))
		return rights(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "opath"))
		return opath();
	if (argc == 2 && !strcmp(argv[1], "socktype"))
		return socktype();
	fprintf(stderr, "usage: sockerr udpbig|more|tcpnc|opath|socktype|rights DIR\n");
	return 2;
}
