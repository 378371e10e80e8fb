//go:build lkl

/* Thin wrappers over liblkl calls whose arguments cgo cannot express well. */
#include <string.h>
#include <lkl.h>
#include <lkl_host.h>
#include "lkl_glue.h"

/* Disks added so far, kept so that lkl_disk_remove gets the handle that
 * lkl_disk_add filled in. */
#define KBOX_MAX_DISKS 16
static struct lkl_disk disks[KBOX_MAX_DISKS];

int kbox_lkl_disk_add(int fd)
{
	struct lkl_disk disk;
	int id;

	memset(&disk, 0, sizeof(disk));
	disk.fd = fd;
	id = lkl_disk_add(&disk);
	if (id >= KBOX_MAX_DISKS) {
		lkl_disk_remove(disk);
		return -24; /* EMFILE */
	}
	if (id >= 0)
		disks[id] = disk;
	return id;
}

int kbox_lkl_disk_remove(int id)
{
	if (id < 0 || id >= KBOX_MAX_DISKS || disks[id].dev == NULL)
		return -22; /* EINVAL */
	int err = lkl_disk_remove(disks[id]);
	memset(&disks[id], 0, sizeof(disks[id]));
	return err;
}

long kbox_lkl_umount_dev(unsigned int disk_id, unsigned int part, int flags, long timeout_ms)
{
	return lkl_umount_dev(disk_id, part, flags, timeout_ms);
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
