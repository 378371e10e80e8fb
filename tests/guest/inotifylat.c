/* inotifylat FILE ROUNDS: how long a watcher of FILE waits for IN_MODIFY
 * after a write of one byte to it, and for IN_CLOSE_WRITE after the
 * writer's close; prints the medians over ROUNDS, in ms:
 * "modify MS close_write MS" (BenchmarkInotifyDelay). */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* wait_for reads in until an event with a bit of mask: the ms it took, or
 * -1 after 10 s without one. */
static double wait_for(int in, unsigned mask, double t0)
{
	char b[4096] __attribute__((aligned(8)));
	for (;;) {
		struct pollfd p = {in, POLLIN, 0};
		if (poll(&p, 1, 10000) <= 0)
			return -1;
		long n = read(in, b, sizeof b);
		for (long i = 0; i + (long)sizeof(struct inotify_event) <= n;) {
			struct inotify_event *e = (struct inotify_event *)(b + i);
			if (e->mask & mask)
				return now_ms() - t0;
			i += sizeof(*e) + e->len;
		}
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: inotifylat FILE ROUNDS\n");
		return 2;
	}
	int rounds = atoi(argv[2]);
	if (rounds < 1 || rounds > 1000) {
		fprintf(stderr, "inotifylat: ROUNDS is 1 to 1000\n");
		return 2;
	}
	int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || close(fd) != 0) {
		perror(argv[1]);
		return 1;
	}
	int in = inotify_init1(IN_NONBLOCK);
	if (in < 0 || inotify_add_watch(in, argv[1], IN_MODIFY | IN_CLOSE_WRITE) < 0) {
		perror("inotify");
		return 1;
	}
	double *mod = calloc(rounds, sizeof *mod), *cw = calloc(rounds, sizeof *cw);
	for (int r = 0; r < rounds; r++) {
		fd = open(argv[1], O_WRONLY | O_APPEND);
		double t0 = now_ms();
		if (fd < 0 || write(fd, "x", 1) != 1) {
			perror("write");
			return 1;
		}
		mod[r] = wait_for(in, IN_MODIFY, t0);
		t0 = now_ms();
		close(fd);
		cw[r] = wait_for(in, IN_CLOSE_WRITE, t0);
		if (mod[r] < 0 || cw[r] < 0) {
			fprintf(stderr, "inotifylat: no event in 10 s\n");
			return 1;
		}
	}
	qsort(mod, rounds, sizeof *mod, cmp);
	qsort(cw, rounds, sizeof *cw, cmp);
	printf("modify %.2f close_write %.2f\n", mod[rounds / 2], cw[rounds / 2]);
	return 0;
}
