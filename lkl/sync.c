//go:build lkl

/*
 * The kernel's locks and semaphores on futexes that spin before they sleep.
 * LKL runs one task at a time: a thread that makes a system call takes the
 * "LKL CPU" (a mutex and a semaphore, arch/lkl/kernel/cpu.c), and a switch
 * between the kernel's threads is a semaphore each. With LKL's POSIX
 * operations every wait sleeps at once and every release that finds a
 * sleeper wakes it with a system call: when a guest's threads stat in
 * parallel (git's index preload), each call's hand-over costs a futex wake,
 * a sleep and a context switch, several microseconds against the call's
 * one. Here a waiter first spins a little while (a short system call's
 * length) for the release, and a release wakes only a waiter that went to
 * sleep. A recursive mutex (LKL's virtio network devices', which kbox does
 * not use) stays LKL's.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <lkl_host.h>
#include "lkl_glue.h"

/*
 * How many times a waiter pauses before it sleeps: about 2 µs of pause
 * (calibrate). Longer spins cost more than they gain on a machine with
 * fewer cores than runnable threads: at 6 µs a relay of LKL's network
 * through host threads lost half its connections a second.
 */
static int spins = 64;
#define SPIN_NS 2000

static inline void cpu_relax(void)
{
#if defined(__x86_64__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static void futex_wait(atomic_int *w, int val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_int *w, int n)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/*
 * A counting semaphore: count, and how many waiters sleep or are about to.
 * How long its waiters spin adapts (limit, from half the full spin): each
 * wait that outlasts it takes an eighth off, down to an eighth of the full
 * spin (a kernel thread's semaphore, waiting to be scheduled; a task's
 * blocked in a read), and one that ends within it moves it a quarter of
 * the way to twice the wait (the LKL CPU's, while another thread's system
 * call runs). Every 16th wait spins in full, to learn again.
 */
struct kbox_sem {
	atomic_int count;
	atomic_int sleepers;
	atomic_int limit;
	atomic_uint waits;
};

static struct lkl_sem *ksem_alloc(int count)
{
	struct kbox_sem *s = malloc(sizeof(*s));

	if (s == NULL)
		return NULL;
	atomic_init(&s->count, count);
	atomic_init(&s->sleepers, 0);
	atomic_init(&s->limit, spins / 2);
	atomic_init(&s->waits, 0);
	return (struct lkl_sem *)s;
}

static void ksem_free(struct lkl_sem *sem) { free(sem); }

static int ksem_take(struct kbox_sem *s)
{
	int c = atomic_load_explicit(&s->count, memory_order_relaxed);

	while (c > 0)
		if (atomic_compare_exchange_weak(&s->count, &c, c - 1))
			return 1;
	return 0;
}

static void ksem_up(struct lkl_sem *sem)
{
	struct kbox_sem *s = (struct kbox_sem *)sem;

	atomic_fetch_add(&s->count, 1);
	/* Ordered after the count (both sequentially consistent): a waiter
	 * counted in sleepers checks the count again before it sleeps. */
	if (atomic_load(&s->sleepers) > 0)
		futex_wake(&s->count, 1);
}

static void ksem_down(struct lkl_sem *sem)
{
	struct kbox_sem *s = (struct kbox_sem *)sem;
	int limit = atomic_load_explicit(&s->limit, memory_order_relaxed);

	if ((atomic_fetch_add_explicit(&s->waits, 1, memory_order_relaxed) & 15) == 0)
		limit = spins;
	for (int i = 0; i < limit; i++) {
		if (ksem_take(s)) {
			int l = atomic_load_explicit(&s->limit, memory_order_relaxed);
			int want = 2 * i + 16 < spins ? 2 * i + 16 : spins;

			atomic_store_explicit(&s->limit, l + (want - l) / 4, memory_order_relaxed);
			return;
		}
		cpu_relax();
	}
	atomic_store_explicit(&s->limit, limit - limit / 8 > spins / 8 ? limit - limit / 8 : spins / 8, memory_order_relaxed);
	atomic_fetch_add(&s->sleepers, 1);
	while (!ksem_take(s))
		futex_wait(&s->count, 0); /* returns at once if the count moved */
	atomic_fetch_sub(&s->sleepers, 1);
}

/*
 * A mutex: 0 free, 1 held, 2 held with sleepers perhaps. A recursive one is
 * LKL's own, kept in orig.
 */
struct kbox_mutex {
	atomic_int state;
	struct lkl_mutex *orig;
};

static struct lkl_mutex *(*orig_mutex_alloc)(int recursive);
static void (*orig_mutex_free)(struct lkl_mutex *m);
static void (*orig_mutex_lock)(struct lkl_mutex *m);
static void (*orig_mutex_unlock)(struct lkl_mutex *m);

static struct lkl_mutex *kmutex_alloc(int recursive)
{
	struct kbox_mutex *m = malloc(sizeof(*m));

	if (m == NULL)
		return NULL;
	atomic_init(&m->state, 0);
	m->orig = NULL;
	if (recursive && (m->orig = orig_mutex_alloc(recursive)) == NULL) {
		free(m);
		return NULL;
	}
	return (struct lkl_mutex *)m;
}

static void kmutex_free(struct lkl_mutex *mu)
{
	struct kbox_mutex *m = (struct kbox_mutex *)mu;

	if (m->orig != NULL)
		orig_mutex_free(m->orig);
	free(m);
}

static void kmutex_lock(struct lkl_mutex *mu)
{
	struct kbox_mutex *m = (struct kbox_mutex *)mu;
	int c = 0;

	if (m->orig != NULL) {
		orig_mutex_lock(m->orig);
		return;
	}
	if (atomic_compare_exchange_strong(&m->state, &c, 1))
		return;
	for (int i = 0; i < spins; i++) {
		cpu_relax();
		c = 0;
		if (atomic_load_explicit(&m->state, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak(&m->state, &c, 1))
			return;
	}
	while (atomic_exchange(&m->state, 2) != 0)
		futex_wait(&m->state, 2);
}

static void kmutex_unlock(struct lkl_mutex *mu)
{
	struct kbox_mutex *m = (struct kbox_mutex *)mu;

	if (m->orig != NULL) {
		orig_mutex_unlock(m->orig);
		return;
	}
	if (atomic_exchange(&m->state, 0) == 2)
		futex_wake(&m->state, 1);
}

/* calibrate sets spins from the time 256 pauses take here (4 ns to 40 ns
 * each, by processor); none where kbox may use one CPU only, where the
 * thread a waiter spins for cannot run meanwhile. */
static void calibrate(void)
{
	struct timespec a, b;
	cpu_set_t cpus;
	long ns;

	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < 2) {
		spins = 0;
		return;
	}

	clock_gettime(CLOCK_MONOTONIC, &a); /* the first call maps the vDSO's data */
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < 256; i++)
		cpu_relax();
	clock_gettime(CLOCK_MONOTONIC, &b);
	ns = (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
	if (ns <= 0)
		ns = 1;
	spins = (int)(SPIN_NS * 256L / ns);
	if (spins < 16)
		spins = 16;
	if (spins > 4096)
		spins = 4096;
}

int kbox_lkl_sync_spins(void)
{
	return lkl_host_ops.sem_down == ksem_down && lkl_host_ops.mutex_lock == kmutex_lock ? spins : -1;
}

void kbox_lkl_own_sync(void)
{
	if (lkl_host_ops.sem_down == ksem_down)
		return;
	calibrate();
	lkl_host_ops.sem_alloc = ksem_alloc;
	lkl_host_ops.sem_free = ksem_free;
	lkl_host_ops.sem_up = ksem_up;
	lkl_host_ops.sem_down = ksem_down;
	orig_mutex_alloc = lkl_host_ops.mutex_alloc;
	orig_mutex_free = lkl_host_ops.mutex_free;
	orig_mutex_lock = lkl_host_ops.mutex_lock;
	orig_mutex_unlock = lkl_host_ops.mutex_unlock;
	lkl_host_ops.mutex_alloc = kmutex_alloc;
	lkl_host_ops.mutex_free = kmutex_free;
	lkl_host_ops.mutex_lock = kmutex_lock;
	lkl_host_ops.mutex_unlock = kmutex_unlock;
}
