/*
 * net_floor: the floor of a round trip made of thread hand-offs on this
 * machine, for docs/benchmarks.md (BenchmarkNetFloor). HOPS threads sit
 * in a ring; a token goes round it ROUNDS times, each thread waiting on
 * its own futex word until the previous one wakes it. One trip round the
 * ring is HOPS hand-offs (a sleep and a wake-up each), no data, no
 * copies: what a 64-byte round trip through kbox's network costs at
 * least when it crosses HOPS threads.
 *
 *   net_floor HOPS ROUNDS   prints "hopsN MICROSECONDS" per round trip
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXHOPS 64

static _Atomic unsigned word[MAXHOPS];
static int hops;
static long rounds;

static void futex_wait(_Atomic unsigned *w, unsigned seen)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic unsigned *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* pass waits for the token at hop i, then hands it to hop i+1. */
static void *pass(void *arg)
{
	int i = (int)(long)arg;
	for (unsigned r = 1; r <= (unsigned)rounds; r++) {
		while (atomic_load(&word[i]) < r)
			futex_wait(&word[i], r - 1);
		int j = (i + 1) % hops;
		atomic_fetch_add(&word[j], 1);
		futex_wake(&word[j]);
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (hops = atoi(argv[1])) < 2 || hops > MAXHOPS || (rounds = atol(argv[2])) < 1) {
		fprintf(stderr, "usage: net_floor HOPS(2-64) ROUNDS\n");
		return 2;
	}
	pthread_t t[MAXHOPS];
	for (int i = 1; i < hops; i++)
		pthread_create(&t[i], NULL, pass, (void *)(long)i);
	double t0 = now();
	/* Hop 0 starts each round and sees the token come back. */
	for (unsigned r = 1; r <= (unsigned)rounds; r++) {
		atomic_fetch_add(&word[1], 1);
		futex_wake(&word[1]);
		while (atomic_load(&word[0]) < r)
			futex_wait(&word[0], r - 1);
	}
	double dt = now() - t0;
	for (int i = 1; i < hops; i++)
		pthread_join(t[i], NULL);
	printf("hops%d %.1f\n", hops, dt / rounds * 1e6);
	return 0;
}
