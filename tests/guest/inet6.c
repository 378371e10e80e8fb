/*
 * inet6 ADDR PORT: connect over TCP/IPv6 to [ADDR]:PORT, send an HTTP/1.0
 * GET of / and print the answer's body (after the blank line); or print
 * why the connection failed ("connect: Connection refused"). Also prints
 * the family of the socket's own address. Used by tests/netobs_test.go,
 * in the guest (through the IPv6 gateway) and natively (to ::1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: inet6 ADDR PORT\n");
		return 2;
	}
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(atoi(argv[2]))};
	if (inet_pton(AF_INET6, argv[1], &a.sin6_addr) != 1) {
		fprintf(stderr, "inet6: bad address %s\n", argv[1]);
		return 2;
	}
	int s = socket(AF_INET6, SOCK_STREAM, 0);
	if (s < 0) {
		printf("socket: %s\n", strerror(errno));
		return 1;
	}
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		printf("connect: %s\n", strerror(errno));
		return 1;
	}
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	if (getsockname(s, (struct sockaddr *)&me, &len) < 0) {
		printf("getsockname: %s\n", strerror(errno));
		return 1;
	}
	printf("connected, own address family %s\n", me.ss_family == AF_INET6 ? "AF_INET6" : "other");
	const char req[] = "GET / HTTP/1.0\r\n\r\n";
	if (write(s, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		printf("write: %s\n", strerror(errno));
		return 1;
	}
	static char buf[1 << 16];
	size_t n = 0;
	ssize_t m;
	while (n < sizeof(buf) - 1 && (m = read(s, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += m;
	buf[n] = 0;
	char *body = strstr(buf, "\r\n\r\n");
	printf("body: %s\n", body ? body + 4 : "(none)");
	return 0;
}
