//go:build lkl

/* Thin wrappers over liblkl calls whose arguments cgo cannot express well. */
#include <string.h>
#include <lkl.h>
#include <lkl_host.h>
#include "lkl_glue.h"

int kbox_lkl_disk_add(int fd)
{
	struct lkl_disk disk;

	memset(&disk, 0, sizeof(disk));
	disk.fd = fd;
	return lkl_disk_add(&disk);
}

long kbox_lkl_mount_dev(unsigned int disk_id, unsigned int part, const char *fstype,
			int flags, const char *opts, char *out, unsigned int outlen)
{
	return lkl_mount_dev(disk_id, part, fstype, flags, opts, out, outlen);
}

long kbox_lkl_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	long params[6] = { a1, a2, a3, a4, a5, a6 };

	return lkl_syscall(nr, params);
}
