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
 *
 * The kernel's clock is the host's CLOCK_MONOTONIC plus clock_ahead, which
 * kbox_lkl_hurry moves forward during teardown, when no guest runs: LKL's
 * system calls run in kernel threads, whose last fput and mntput wait a
 * tick (10 ms, HZ is 100 in LKL's arch Kconfig) on a workqueue, and an
 * unmount waits for them. kbox_lkl_hurry moves the clock a tick on and
 * fires the armed timers at once, so that the deferred work runs now.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
	struct kbox_timer *next; /* in timers, while its thread runs */
};

/* The timers whose threads run (kbox_lkl_hurry fires them). */
static pthread_mutex_t timers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kbox_timer *timers;

static _Atomic uint64_t clock_ahead;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void unlist(struct kbox_timer *t)
{
	pthread_mutex_lock(&timers_mu);
	for (struct kbox_timer **pp = &timers; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	pthread_mutex_unlock(&timers_mu);
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
	unlist(t);
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
	pthread_mutex_lock(&timers_mu);
	t->next = timers;
	timers = t;
	pthread_mutex_unlock(&timers_mu);
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
		unlist(t);
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

/* The kernel's clock (lkl_host_ops.time). */
static unsigned long long kbox_time_ns(void)
{
	return mono_ns() + clock_ahead;
}

void kbox_lkl_hurry(unsigned long ns)
{
	clock_ahead += ns;
	pthread_mutex_lock(&timers_mu);
	for (struct kbox_timer *t = timers; t != NULL; t = t->next) {
		pthread_mutex_lock(&t->mu);
		if (t->deadline != 0) {
			t->deadline = 1; /* due */
			pthread_cond_signal(&t->cv);
		}
		pthread_mutex_unlock(&t->mu);
	}
	pthread_mutex_unlock(&timers_mu);
}

void kbox_lkl_own_timer(void)
{
	if (lkl_host_ops.timer_alloc == kbox_timer_alloc)
		return;
	lkl_host_ops.time = kbox_time_ns;
	lkl_host_ops.timer_alloc = kbox_timer_alloc;
	lkl_host_ops.timer_set_oneshot = kbox_timer_set_oneshot;
	lkl_host_ops.timer_free = kbox_timer_free;
}
