/* Many internet sockets at once (tests/net_test.go TestNetSocketBound),
 * against a UDP echo server at ADDR PORT.
 *
 *   inetmany ADDR PORT N      open up to N UDP sockets at once: print how
 *                             many opened and the first error (kbox's
 *                             bound on internet sockets), then send a
 *                             datagram to ADDR PORT from a socket opened
 *                             after closing one and read the echo
 *   inetmany ADDR PORT N P    P child processes do the same at once (forked
 *                             here, with no signal handlers: their forks
 *                             cannot be interrupted), then the parent
 *                             alone does it for 10 sockets
 *
 * It forks: the seccomp tier only (inet itself does not fork, so that auto
 * runs it in the rewrite tier).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sockaddr_in dest;

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(1);
}

static int many(int n)
{
	int got = 0, last = -1;
	for (; got < n; got++) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		if (s < 0) {
			printf("opened %d, then %s\n", got, strerror(errno));
			break;
		}
		last = s;
	}
	if (got == n)
		printf("opened %d\n", got);
	if (got == 0)
		return 0;
	close(last); /* room for the check */
	last = socket(AF_INET, SOCK_DGRAM, 0);
	if (last < 0)
		die("socket after close");
	char b[8] = "many";
	if (sendto(last, b, 4, 0, (struct sockaddr *)&dest, sizeof(dest)) != 4)
		die("sendto");
	if (recv(last, b, sizeof(b), 0) != 4 || memcmp(b, "many", 4))
		die("echo");
	printf("echo ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: inetmany ADDR PORT N [P]\n");
		return 2;
	}
	dest.sin_family = AF_INET;
	dest.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &dest.sin_addr) != 1)
		return 2;
	int n = atoi(argv[3]);
	if (argc == 4)
		return many(n);
	for (int i = 0; i < atoi(argv[4]); i++) {
		pid_t c = fork();
		if (c < 0)
			die("fork");
		if (c == 0)
			_exit(many(n));
	}
	/* A child's check after its close may lose the room to another
	 * (exit 1): only a child killed is a failure. */
	int bad = 0, st;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st);
	if (bad)
		return 1;
	return many(10);
}
