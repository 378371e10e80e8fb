//go:build lkl

/*
 * The credentials LKL checks file operations against, per host thread.
 *
 * LKL gives every host thread that calls into it a kernel task of its own,
 * created with root's credentials. kbox keeps that task's real, effective
 * and saved uid 0 and its permitted capabilities, and switches only what
 * the VFS looks at (fsuid, fsgid, supplementary groups, effective
 * capabilities) to the guest's, so that permission checks, the owner of
 * created files and the set-gid directory rules are the kernel's own.
 *
 * A thread says which credentials it wants (kbox_cred_want, kept in
 * thread-local storage); they are applied lazily, by the next LKL call of
 * that thread, and only when they differ from the ones last applied there
 * (compared by an id that the Go side gives each distinct set). A plain
 * LKL call therefore costs one comparison. Id 0 is kbox's own root: the
 * credentials LKL gives a new task.
 */
#include <stdlib.h>
#include <string.h>
#include <lkl.h>
#include "lkl_glue.h"

struct want {
	unsigned long long id;
	unsigned int fsuid, fsgid;
	unsigned long long cap;
	unsigned int ngroups, room;
	unsigned int *groups;
};

/* cur is what the thread's LKL calls run with; saved holds the guest's
 * while a root section (kbox_cred_root_begin) has swapped it out. */
static __thread struct want cur, saved;
static __thread int root_depth, swapped;
/* applied is the id of the credentials the thread's task has (a new task
 * has root's: id 0); applied_cap its effective capabilities (a new task
 * has all). A failed switch leaves BAD_ID and no capabilities known, so
 * the next call starts the switch again: no call runs with credentials
 * half set. */
static __thread unsigned long long applied;
static __thread unsigned long long applied_cap = ~0ULL;
/* wanted mirrors the id kbox_cred_want compares with (saved's in a root
 * section that swapped, else cur's): the Go side reads it through
 * kbox_cred_slot, on the thread itself, to skip a call that would change
 * nothing. */
static __thread unsigned long long wanted;

static void mirror(void)
{
	wanted = swapped ? saved.id : cur.id;
}

unsigned long long *kbox_cred_slot(void)
{
	return &wanted;
}
#define BAD_ID (~0ULL)

/* full_set is a task's permitted set (every capability LKL knows), read once
 * by whichever thread comes first (the same value for all: atomics only
 * to keep the compiler honest). */
static unsigned long long full_set;

static unsigned long long full_get(void)
{
	return __atomic_load_n(&full_set, __ATOMIC_RELAXED);
}

struct cap_header {
	unsigned int version;
	int pid;
};
struct cap_data {
	unsigned int effective, permitted, inheritable;
};
#define CAP_V3 0x20080522

static long sys3(long nr, long a1, long a2, long a3)
{
	long p[6] = { a1, a2, a3, 0, 0, 0 };

	return lkl_syscall(nr, p);
}

static long full_caps(void)
{
	struct cap_header h = { CAP_V3, 0 };
	struct cap_data d[2];
	long r;

	if (full_get() != 0)
		return 0;
	r = sys3(__lkl__NR_capget, (long)&h, (long)d, 0);
	if (r < 0)
		return r;
	__atomic_store_n(&full_set, (unsigned long long)d[1].permitted << 32 | d[0].permitted, __ATOMIC_RELAXED);
	return 0;
}

static long set_effective(unsigned long long eff)
{
	struct cap_header h = { CAP_V3, 0 };
	struct cap_data d[2];
	unsigned long long full = full_get();

	eff &= full;
	d[0].effective = (unsigned int)eff;
	d[1].effective = (unsigned int)(eff >> 32);
	d[0].permitted = (unsigned int)full;
	d[1].permitted = (unsigned int)(full >> 32);
	d[0].inheritable = d[1].inheritable = 0;
	return sys3(__lkl__NR_capset, (long)&h, (long)d, 0);
}

/* The capabilities a switch needs in the effective set. */
#define SWITCH_CAPS ((1ULL << 6) | (1ULL << 7)) /* CAP_SETGID, CAP_SETUID */

static long apply(void)
{
	long r;

	applied = BAD_ID;
	if ((r = full_caps()) < 0)
		return r;
	if ((applied_cap & SWITCH_CAPS) != SWITCH_CAPS) {
		/* The task keeps every capability permitted: take them back
		 * into the effective set for the switch. */
		if ((r = set_effective(full_get())) < 0)
			return r;
		applied_cap = full_get();
	}
	if ((r = sys3(__lkl__NR_setgroups, cur.ngroups, (long)cur.groups, 0)) < 0)
		return r;
	/* setfsuid and setfsgid return the previous id, never an error: ask
	 * again to see that the change was made. */
	sys3(__lkl__NR_setfsgid, cur.fsgid, 0, 0);
	if ((unsigned int)sys3(__lkl__NR_setfsgid, -1, 0, 0) != cur.fsgid)
		return -1; /* EPERM */
	sys3(__lkl__NR_setfsuid, cur.fsuid, 0, 0);
	if ((unsigned int)sys3(__lkl__NR_setfsuid, -1, 0, 0) != cur.fsuid)
		return -1;
	/* setfsuid moved the filesystem capabilities: set the effective set
	 * exactly. */
	applied_cap = 0;
	if ((r = set_effective(cur.cap)) < 0)
		return r;
	applied_cap = cur.cap & full_get();
	applied = cur.id;
	return 0;
}

long kbox_cred_sync(void)
{
	if (cur.id == applied)
		return 0;
	return apply();
}

static int privileged(const struct want *w)
{
	unsigned long long full = full_get();

	return w->id == 0 || (w->fsuid == 0 && full != 0 && (w->cap & full) == full);
}

int kbox_cred_want(unsigned long long id, unsigned int fsuid, unsigned int fsgid, unsigned long long cap,
		   unsigned int ngroups, const unsigned int *groups)
{
	struct want *w = swapped ? &saved : &cur;

	if (w->id == id)
		return 0;
	if (ngroups > w->room) {
		unsigned int *g = realloc(w->groups, ngroups * sizeof(*g));

		if (g == NULL)
			return -12; /* ENOMEM */
		w->groups = g;
		w->room = ngroups;
	}
	if (ngroups > 0)
		memcpy(w->groups, groups, ngroups * sizeof(*groups));
	w->ngroups = ngroups;
	w->fsuid = fsuid;
	w->fsgid = fsgid;
	w->cap = cap;
	w->id = id;
	if (id == 0)
		w->cap = ~0ULL;
	mirror();
	return 0;
}

void kbox_cred_root_begin(void)
{
	struct want t;

	if (root_depth++ > 0)
		return;
	full_caps();
	if (privileged(&cur))
		return; /* already root as far as the VFS can tell */
	t = saved;
	saved = cur;
	cur = t;
	cur.id = 0;
	cur.fsuid = cur.fsgid = 0;
	cur.cap = ~0ULL;
	cur.ngroups = 0;
	swapped = 1;
	mirror();
}

void kbox_cred_root_end(void)
{
	struct want t;

	if (root_depth == 0 || --root_depth > 0 || !swapped)
		return;
	t = cur;
	cur = saved;
	saved = t;
	swapped = 0;
	mirror();
}

unsigned long long kbox_cred_applied(void)
{
	return applied;
}
