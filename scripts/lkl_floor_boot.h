/*
 * lkl_floor_boot.h: boots the liblkl kbox links, for the floor models
 * (scripts/lkl_floor.c, scripts/lkl_net_floor.c), with either LKL API
 * generation, as lkl/boot.c does: lkl_start_kernel(&ops, cmdline), or
 * lkl_init(&ops) and lkl_start_kernel(cmdline).
 */
#ifndef KBOX_LKL_FLOOR_BOOT_H
#define KBOX_LKL_FLOOR_BOOT_H

#include <lkl.h>
#include <lkl_host.h>

extern int lkl_init(struct lkl_host_operations *ops) __attribute__((weak));
typedef int (*floor_start_old_fn)(struct lkl_host_operations *, const char *, ...);
typedef int (*floor_start_new_fn)(const char *, ...);

static int floor_boot(const char *cmdline)
{
	void *start = (void *)lkl_start_kernel;
	if (lkl_init != NULL) {
		int err = lkl_init(&lkl_host_ops);
		if (err < 0)
			return err;
		return ((floor_start_new_fn)start)("%s", cmdline);
	}
	return ((floor_start_old_fn)start)(&lkl_host_ops, "%s", cmdline);
}

#endif
