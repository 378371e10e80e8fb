//go:build lkl

/*
 * Kernel start and stop, written so one object links against both LKL API
 * generations. This file deliberately does not include lkl.h: the two
 * generations declare lkl_start_kernel with different prototypes.
 *
 *   older (e.g. LKL 6.0): lkl_start_kernel(&lkl_host_ops, fmt, ...)
 *   newer (upstream):     lkl_init(&lkl_host_ops); lkl_start_kernel(fmt, ...);
 *                         ... lkl_sys_halt(); lkl_cleanup();
 *
 * lkl_init and lkl_cleanup are weak references: they resolve to NULL when the
 * linked liblkl is of the older generation.
 */
#include <stddef.h>
#include "lkl_glue.h"

struct lkl_host_operations;
extern struct lkl_host_operations lkl_host_ops;
extern int lkl_init(struct lkl_host_operations *ops) __attribute__((weak));
extern void lkl_cleanup(void) __attribute__((weak));
extern int lkl_start_kernel(void);
extern long lkl_sys_halt(void);

typedef int (*start_old_fn)(struct lkl_host_operations *, const char *, ...);
typedef int (*start_new_fn)(const char *, ...);

int kbox_lkl_api_generation(void)
{
	return lkl_init != NULL ? 2 : 1;
}

int kbox_lkl_boot(const char *cmdline)
{
	if (lkl_init != NULL) {
		int err = lkl_init(&lkl_host_ops);
		if (err < 0)
			return err;
		start_new_fn start = (start_new_fn)lkl_start_kernel;
		return start("%s", cmdline);
	}
	start_old_fn start = (start_old_fn)lkl_start_kernel;
	return start(&lkl_host_ops, "%s", cmdline);
}

void kbox_lkl_shutdown(void)
{
	kbox_cred_root_begin(); /* halting needs CAP_SYS_BOOT */
	kbox_cred_sync();
	lkl_sys_halt();
	if (lkl_cleanup != NULL)
		lkl_cleanup();
}
