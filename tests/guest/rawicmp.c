/*
 * rawicmp: raw and datagram ICMP sockets (what ping opens).
 *
 *   rawicmp ADDR   open socket(AF_INET or AF_INET6, SOCK_RAW, ICMP) and
 *                  socket(..., SOCK_DGRAM, ICMP); with the raw one, send
 *                  an echo request to ADDR and wait up to 2 s for its
 *                  reply (the IPv4 reply comes with its IP header, the
 *                  IPv6 one without); then an echo through the datagram
 *                  socket.
 *
 * Prints one line per step, so that the same program run natively as
 * root gives the same output. As a user without CAP_NET_RAW the raw
 * socket fails with EPERM.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned short csum(const unsigned char *p, int n)
{
	unsigned long s = 0;
	for (int i = 0; i + 1 < n; i += 2)
		s += p[i] << 8 | p[i + 1];
	if (n & 1)
		s += p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

/* An echo request of 16 bytes: type, code, checksum, id, seq, payload. */
static int echo(unsigned char *b, int v6, int id, int seq)
{
	memset(b, 0, 16);
	b[0] = v6 ? 128 : 8;
	b[4] = id >> 8, b[5] = id;
	b[6] = seq >> 8, b[7] = seq;
	memcpy(b + 8, "kboxping", 8);
	if (!v6) { /* ICMPv6's checksum is the kernel's */
		unsigned short c = csum(b, 16);
		b[2] = c >> 8, b[3] = c;
	}
	return 16;
}

/* Waits up to 2 s for the echo reply to (id, seq) on s; off is where the
 * ICMP header starts in what s receives (the IPv4 header's length for a
 * raw IPv4 socket, read from each packet: -1). The datagram socket's id
 * is its port, the kernel's (any = 1). */
static const char *reply(int s, int v6, int off, int id, int seq, int any)
{
	unsigned char b[2048];
	for (int tries = 0; tries < 50; tries++) {
		struct pollfd p = { s, POLLIN, 0 };
		if (poll(&p, 1, 2000) != 1)
			return "no reply";
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		int n = recvfrom(s, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
		if (n < 0)
			return strerror(errno);
		int o = off < 0 ? (b[0] & 0xf) * 4 : off;
		if (n < o + 8)
			continue;
		unsigned char *i = b + o;
		if (i[0] != (v6 ? 129 : 0)) /* a request, or another packet */
			continue;
		if ((any || (i[4] << 8 | i[5]) == id) && (i[6] << 8 | i[7]) == seq)
			return memcmp(i + 8, "kboxping", 8) == 0 ? "ok" : "wrong payload";
	}
	return "no reply";
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rawicmp ADDR\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	struct sockaddr_storage to = { 0 };
	socklen_t tl;
	int v6 = strchr(argv[1], ':') != NULL;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&to;
		a->sin6_family = AF_INET6;
		tl = sizeof(*a);
		if (inet_pton(AF_INET6, argv[1], &a->sin6_addr) != 1)
			return 2;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&to;
		a->sin_family = AF_INET;
		tl = sizeof(*a);
		if (inet_pton(AF_INET, argv[1], &a->sin_addr) != 1)
			return 2;
	}
	int fam = v6 ? AF_INET6 : AF_INET, proto = v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP;
	unsigned char b[16];
	int id = (getpid() & 0x7fff) | 0x100;

	int r = socket(fam, SOCK_RAW, proto);
	printf("raw socket: %s\n", r < 0 ? strerror(errno) : "ok");
	if (r >= 0) {
		int n = sendto(r, b, echo(b, v6, id, 1), 0, (struct sockaddr *)&to, tl);
		printf("raw send: %s\n", n < 0 ? strerror(errno) : "ok");
		if (n >= 0)
			printf("raw echo reply: %s\n", reply(r, v6, v6 ? 0 : -1, id, 1, 0));
		close(r);
	}
	int d = socket(fam, SOCK_DGRAM, proto);
	printf("datagram socket: %s\n", d < 0 ? strerror(errno) : "ok");
	if (d >= 0) {
		int n = sendto(d, b, echo(b, v6, id, 2), 0, (struct sockaddr *)&to, tl);
		printf("datagram send: %s\n", n < 0 ? strerror(errno) : "ok");
		if (n >= 0)
			printf("datagram echo reply: %s\n", reply(d, v6, 0, id, 2, 1));
		close(d);
	}
	return 0;
}
