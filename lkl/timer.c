//go:build lkl

/*
 * The kernel's clock event on one host thread. LKL's own timer operations
 * use a POSIX timer with SIGEV_THREAD, and glibc starts a new thread for
 * each expiry: an idle kernel starts and ends some fifty threads a second,
 * a short run a hundred (docs/benchmarks.md). Here each timer is one
 * thread, started at timer_alloc, that sleeps until its deadline
 * (CLOCK_MONOTONIC) and calls the kernel's function; timer_set_oneshot
 * moves the deadline and wakes it. The kernel calls timer_set_oneshot from
 * that function (its interrupt handler re-arms the clock event), so the
 * function runs with the timer's lock released. timer_free asks the
 * thread to end and returns: the thread frees the timer as it leaves, and
 * never calls the function again. It cannot wait for the thread, which may
 * be waiting for the kernel the caller holds.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <lkl_host.h>
#include "lkl_glue.h"

struct kbox_timer {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t deadline; /* CLOCK_MONOTONIC ns; 0: not armed */
	int stop;
	void (*fn)(void *);
	void *arg;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void *timer_loop(void *p)
{
	struct kbox_timer *t = p;

	pthread_mutex_lock(&t->mu);
	while (!t->stop) {
		if (t->deadline == 0) {
			pthread_cond_wait(&t->cv, &t->mu);
			continue;
		}
		uint64_t now = mono_ns();
		if (now < t->deadline) {
			struct timespec ts = {
				.tv_sec = (time_t)(t->deadline / 1000000000ULL),
				.tv_nsec = (long)(t->deadline % 1000000000ULL),
			};
			pthread_cond_timedwait(&t->cv, &t->mu, &ts);
			continue;
		}
		t->deadline = 0;
		pthread_mutex_unlock(&t->mu);
		t->fn(t->arg);
		pthread_mutex_lock(&t->mu);
	}
	pthread_mutex_unlock(&t->mu);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	free(t);
	return NULL;
}

static void *kbox_timer_alloc(void (*fn)(void *), void *arg)
{
	struct kbox_timer *t = calloc(1, sizeof(*t));
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t th;

	if (t == NULL)
		return NULL;
	t->fn = fn;
	t->arg = arg;
	pthread_mutex_init(&t->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	/* Every signal blocked, as on glibc's timer threads: the process's
	 * signals go to kbox's own threads. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(&th, &ta, timer_loop, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&ta);
	if (err != 0) {
		pthread_cond_destroy(&t->cv);
		pthread_mutex_destroy(&t->mu);
		free(t);
		return NULL;
	}
	return t;
}

static int kbox_timer_set_oneshot(void *p, unsigned long ns)
{
	struct kbox_timer *t = p;

	/* LKL drops its timer at the clock event's shutdown: a late arming
	 * gets the error glibc's timer_settime gives a deleted timer. */
	if (t == NULL)
		return -EINVAL;
	pthread_mutex_lock(&t->mu);
	t->deadline = mono_ns() + ns;
	if (t->deadline == 0)
		t->deadline = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	return 0;
}

static void kbox_timer_free(void *p)
{
	struct kbox_timer *t = p;

	if (t == NULL)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

void kbox_lkl_own_timer(void)
{
	if (lkl_host_ops.timer_alloc == kbox_timer_alloc)
		return;
	lkl_host_ops.timer_alloc = kbox_timer_alloc;
	lkl_host_ops.timer_set_oneshot = kbox_timer_set_oneshot;
	lkl_host_ops.timer_free = kbox_timer_free;
}
