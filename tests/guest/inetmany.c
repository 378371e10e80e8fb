/* Many internet sockets at once (tests/net_test.go TestNetSocketBound),
 * against a UDP echo server at ADDR PORT.
 *
 *   inetmany ADDR PORT N      open up to N UDP sockets at once: print how
 *                             many opened and the first error (kbox's
 *                             bound on internet sockets), then send a
 *                             datagram to ADDR PORT from a socket opened
 *                             after closing one and read the echo
 *   inetmany ADDR PORT N P    P child processes do the same at once (all
 *                             start together, and none closes before all
 *                             have stopped opening), then the parent alone
 *                             does it for 10 sockets
 *   inetmany prefork PORT W   a pre-forking server: a TCP listener on PORT
 *                             shared by W forked workers, each accepting in
 *                             a loop and answering a connection's first
 *                             message M with "wI:M" (I: the worker); "quit"
 *                             ends its worker, then the others; the parent
 *                             prints "workers done"
 *
 * It forks: the seccomp tier only (inet itself does not fork, so that auto
 * runs it in the rewrite tier).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sockaddr_in dest;

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(1);
}

/* Barriers of the P children (MAP_SHARED, made before the fork): all
 * start opening together, and none closes or exits before all have
 * stopped opening, so what they print adds up to what was open at once,
 * and the room a close makes is taken back by the same process. */
static volatile int *bar; /* [0]: started, [1]: stopped */
static int nproc;

static void barrier(int i)
{
	if (!bar)
		return;
	__atomic_add_fetch(&bar[i], 1, __ATOMIC_SEQ_CST);
	/* At most 30 s: a sibling that never came (a failed fork) must not
	 * leave the others spinning for ever. */
	for (int ms = 0; __atomic_load_n(&bar[i], __ATOMIC_SEQ_CST) < nproc && ms < 30000; ms++)
		usleep(1000);
}

static int many(int n)
{
	int got = 0, last = -1;
	barrier(0);
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
	barrier(1);
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

static int prefork(int port, int workers)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	pid_t kids[64];
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
		die("socket");
	if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 128) != 0)
		die("bind/listen");
	if (workers > 64)
		workers = 64;
	for (int i = 0; i < workers; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			die("fork");
		if (kids[i] > 0)
			continue;
		for (;;) {
			char in[256], out[300];
			int c = accept(l, NULL, NULL);
			if (c < 0)
				die("accept");
			ssize_t n = read(c, in, sizeof in);
			if (n <= 0) {
				close(c);
				continue;
			}
			int m = snprintf(out, sizeof out, "w%d:%.*s", i, (int)n, in);
			write(c, out, m);
			close(c);
			if (n == 4 && !memcmp(in, "quit", 4))
				_exit(0);
		}
	}
	close(l);
	int st, bad = 0;
	if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		bad = 1;
	for (int i = 0; i < workers; i++)
		kill(kids[i], SIGTERM);
	while (wait(&st) > 0)
		;
	printf("workers done%s\n", bad ? " (the first one failed)" : "");
	return bad;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 4 && !strcmp(argv[1], "prefork"))
		return prefork(atoi(argv[2]), atoi(argv[3]));
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: inetmany ADDR PORT N [P] | prefork PORT W\n");
		return 2;
	}
	dest.sin_family = AF_INET;
	dest.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &dest.sin_addr) != 1)
		return 2;
	int n = atoi(argv[3]);
	if (argc == 4)
		return many(n);
	nproc = atoi(argv[4]);
	bar = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (bar == MAP_FAILED)
		die("mmap");
	for (int i = 0; i < nproc; i++) {
		pid_t c = fork();
		if (c < 0)
			die("fork");
		if (c == 0)
			_exit(many(n));
	}
	/* A child's check after its close could lose the room to another
	 * still opening (exit 1) before the barrier: only a child killed is
	 * a failure. */
	bar = NULL;
	int bad = 0, st;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st);
	if (bad)
		return 1;
	return many(10);
}
