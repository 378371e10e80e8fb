/* Close-delimited replies on the guest's loopback (tests/net_bench_test.go,
 * BenchmarkNetCloses), as an HTTP/1.0 server gives them:
 *
 *   closes N   N requests, each on a new connection to a server thread
 *              on 127.0.0.1: the client writes a byte, the server reads
 *              it, answers five bytes and closes, and the client reads
 *              to the end of the stream; prints the time per request.
 *
 * The client's end of stream is the server's FIN: it measures how soon a
 * close reaches the peer. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int n;
static int lfd;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *serve(void *arg)
{
	(void)arg;
	for (int i = 0; i < n; i++) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			die("accept");
		char b;
		if (read(c, &b, 1) != 1)
			die("server read");
		if (write(c, "hello", 5) != 5)
			die("server write");
		close(c);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (n = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: closes N\n");
		return 2;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if ((lfd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		die("socket");
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		die("listen");
	getsockname(lfd, (struct sockaddr *)&a, &al);
	pthread_t t;
	pthread_create(&t, NULL, serve, NULL);
	double t0 = now();
	for (int i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			die("connect");
		if (write(s, "r", 1) != 1)
			die("write");
		char buf[16];
		int got = 0, k;
		while ((k = read(s, buf + got, sizeof(buf) - got)) > 0)
			got += k;
		if (k < 0 || got != 5)
			die("read to the end");
		close(s);
	}
	double dt = now() - t0;
	pthread_join(t, NULL);
	printf("closes %d: %.1f us each\n", n, dt / n * 1e6);
	return 0;
}
