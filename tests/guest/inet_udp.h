/* inet_udp.h: inet's UDP modes (udp, udpempty, udperr), included by
 * inet.c where they stand in its order, after the helpers they use. */

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
