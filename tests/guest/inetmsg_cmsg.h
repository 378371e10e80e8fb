/* inetmsg_cmsg.h: inetmsg's control messages (mode cmsg), included by
 * inetmsg.c where they stand in its order, after the helpers they use. */

/* cmsgs prints the control messages of mh, one line each. */
static void cmsgs(const char *what, struct msghdr *mh)
{
	printf("%s: flags%s%s controllen %s\n", what, mh->msg_flags & MSG_CTRUNC ? " MSG_CTRUNC" : "",
	       mh->msg_flags & MSG_TRUNC ? " MSG_TRUNC" : "", mh->msg_controllen ? "some" : "0");
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			char ifn[IF_NAMESIZE] = "?", spec[16], dst[16];
			if_indextoname(pi.ipi_ifindex, ifn);
			inet_ntop(AF_INET, &pi.ipi_spec_dst, spec, sizeof(spec));
			inet_ntop(AF_INET, &pi.ipi_addr, dst, sizeof(dst));
			printf("  IP_PKTINFO if %s spec_dst %s addr %s\n", ifn, spec, dst);
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
			printf("  IP_TOS 0x%x\n", *(unsigned char *)CMSG_DATA(c));
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
			int ttl;
			memcpy(&ttl, CMSG_DATA(c), sizeof(ttl));
			printf("  IP_TTL %d\n", ttl);
		} else if (c->cmsg_level == SOL_SOCKET && (c->cmsg_type == SO_TIMESTAMPNS || c->cmsg_type == SO_TIMESTAMP)) {
			struct timespec now, ts;
			clock_gettime(CLOCK_REALTIME, &now);
			if (c->cmsg_type == SO_TIMESTAMPNS) {
				memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			} else {
				struct timeval tv;
				memcpy(&tv, CMSG_DATA(c), sizeof(tv));
				ts.tv_sec = tv.tv_sec, ts.tv_nsec = tv.tv_usec * 1000;
			}
			double d = (now.tv_sec - ts.tv_sec) + (now.tv_nsec - ts.tv_nsec) / 1e9;
			printf("  %s within 2 s of now: %s\n", c->cmsg_type == SO_TIMESTAMPNS ? "SO_TIMESTAMPNS" : "SO_TIMESTAMP",
			       d >= 0 && d < 2 ? "yes" : "no");
			if (!(d >= 0 && d < 2))
				fprintf(stderr, "timestamp %ld.%09ld now %ld.%09ld\n", (long)ts.tv_sec, ts.tv_nsec,
					(long)now.tv_sec, now.tv_nsec);
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			char ifn[IF_NAMESIZE] = "?", dst[64];
			if_indextoname(pi.ipi6_ifindex, ifn);
			inet_ntop(AF_INET6, &pi.ipi6_addr, dst, sizeof(dst));
			printf("  IPV6_PKTINFO if %s addr %s\n", ifn, dst);
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
			int h;
			memcpy(&h, CMSG_DATA(c), sizeof(h));
			printf("  IPV6_HOPLIMIT %d\n", h);
		} else {
			printf("  level %d type %d len %d\n", c->cmsg_level, c->cmsg_type, (int)c->cmsg_len);
		}
	}
}

/* rcv receives one datagram on r with a control buffer of clen bytes. */
static void rcv(const char *what, int r, size_t clen)
{
	char b[64];
	union {
		char buf[512];
		struct cmsghdr align;
	} u;
	struct sockaddr_in6 from;
	struct iovec iv = { b, sizeof(b) };
	struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iv, .msg_iovlen = 1,
			     .msg_control = clen ? u.buf : NULL, .msg_controllen = clen };
	memset(&u, 0, sizeof(u));
	waitin(r);
	int n = recvmsg(r, &mh, 0);
	if (n < 0) {
		printf("%s: %s\n", what, strerror(errno));
		return;
	}
	char src[64] = "?";
	if (from.sin6_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&from)->sin_addr, src, sizeof(src));
	else if (from.sin6_family == AF_INET6)
		inet_ntop(AF_INET6, &from.sin6_addr, src, sizeof(src));
	printf("%s: %d '%.*s' from %s\n", what, n, n, b, src);
	cmsgs(what, &mh);
}

/* sndc sends text from s to a with one control message of level and
 * type holding the l bytes at v. */
static void sndc(int s, struct sockaddr *a, socklen_t al, const char *text, int level, int type, void *v, size_t l)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iv = { (void *)text, strlen(text) };
	struct msghdr mh = { .msg_name = a, .msg_namelen = al, .msg_iov = &iv, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = CMSG_SPACE(l) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(l);
	memcpy(CMSG_DATA(c), v, l);
	int n = sendmsg(s, &mh, 0);
	if (n < 0)
		printf("sendmsg %s: %s\n", text, strerror(errno));
}

static int do_cmsg(void)
{
	struct sockaddr_in ra, sa;
	int r = udp(&ra), s = udp(&sa), one = 1;
	struct sockaddr *to = (struct sockaddr *)&ra;

	sendto(s, "plain", 5, 0, to, sizeof(ra));
	rcv("none asked", r, 512);

	setsockopt(r, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	setsockopt(r, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	setsockopt(r, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one));
	setsockopt(r, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
	int tos = 0x10;
	setsockopt(s, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	sendto(s, "tos", 3, 0, to, sizeof(ra));
	rcv("all four", r, 512);

	tos = 0x20;
	sndc(s, to, sizeof(ra), "cmsg tos", IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	rcv("sent with IP_TOS", r, 512);
	int ttl = 7;
	sndc(s, to, sizeof(ra), "cmsg ttl", IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
	rcv("sent with IP_TTL", r, 512);
	struct in_pktinfo pi;
	memset(&pi, 0, sizeof(pi));
	inet_pton(AF_INET, "127.0.0.2", &pi.ipi_spec_dst);
	sndc(s, to, sizeof(ra), "cmsg src", IPPROTO_IP, IP_PKTINFO, &pi, sizeof(pi));
	rcv("sent with IP_PKTINFO 127.0.0.2", r, 512);

	/* Room for the first message only; then none at all. */
	sendto(s, "short", 5, 0, to, sizeof(ra));
	rcv("room for one", r, CMSG_SPACE(sizeof(struct in_pktinfo)));
	sendto(s, "none", 4, 0, to, sizeof(ra));
	rcv("no room", r, 0);
	/* SO_TIMESTAMP (a timeval) alone. */
	int zero = 0;
	setsockopt(r, IPPROTO_IP, IP_PKTINFO, &zero, sizeof(zero));
	setsockopt(r, IPPROTO_IP, IP_RECVTOS, &zero, sizeof(zero));
	setsockopt(r, IPPROTO_IP, IP_RECVTTL, &zero, sizeof(zero));
	setsockopt(r, SOL_SOCKET, SO_TIMESTAMPNS, &zero, sizeof(zero));
	setsockopt(r, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one));
	sendto(s, "tv", 2, 0, to, sizeof(ra));
	rcv("SO_TIMESTAMP", r, 512);

	/* IPv6 on ::1. */
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int r6 = socket(AF_INET6, SOCK_DGRAM, 0), s6 = socket(AF_INET6, SOCK_DGRAM, 0);
	socklen_t l6 = sizeof(a6);
	if (r6 < 0 || s6 < 0 || bind(r6, (struct sockaddr *)&a6, sizeof(a6)) < 0 ||
	    getsockname(r6, (struct sockaddr *)&a6, &l6) < 0) {
		printf("ipv6: %s\n", strerror(errno));
		return 0;
	}
	setsockopt(r6, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	setsockopt(r6, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one, sizeof(one));
	int hops = 9;
	sndc(s6, (struct sockaddr *)&a6, sizeof(a6), "six", IPPROTO_IPV6, IPV6_HOPLIMIT, &hops, sizeof(hops));
	rcv("ipv6", r6, 512);
	return 0;
}
