/*
 * lkl_floor: the floor of LKL itself under a workload of path lookups,
 * with no kbox and no interception. It boots the liblkl kbox links (same
 * kernel command line as kbox's default), mounts an image read-only and
 * walks a directory tree the way find(1) does (open, getdents64, and a
 * newfstatat of each entry), directly through lkl_syscall. With a host
 * directory as well (a tree of the same image, e.g. from `debugfs rdump`),
 * it walks that natively in the same run, so the ratio of the two is
 * measured in the same minutes.
 *
 * Build and run (docs/benchmarks.md, "Workloads"):
 *   gcc -O2 -I/opt/lkl/include scripts/lkl_floor.c -L/opt/lkl/lib -l:liblkl.a \
 *       -lpthread -lrt -o /tmp/lkl_floor
 *   /tmp/lkl_floor IMAGE.ext4 /usr [HOSTTREE [read]]
 * With "read", each regular file is also opened and read whole and .git
 * is not entered: what git status does in a work tree whose index entries
 * are racily clean. It prints the milliseconds of the boot and the mount,
 * then the entries walked and the milliseconds of each walk, each
 * repeated 5 times (first walk cold, median of the rest warm).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lkl_floor_boot.h"

static const char *cmdline = "mem=32M loglevel=0 stack_depot_disable=on pty.legacy_count=0";

static long lsys(long nr, long a, long b, long c, long d)
{
	long p[6] = {a, b, c, d, 0, 0};
	return lkl_syscall(nr, p);
}

struct dent {
	unsigned long long ino;
	long long off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

static int readfiles;

/* slurp reads the regular file name in directory fd whole. */
static void slurp(int lkl, int fd, const char *name)
{
	char buf[65536];
	int f = lkl ? (int)lsys(__lkl__NR_openat, fd, (long)name, O_RDONLY, 0) : openat(fd, name, O_RDONLY);
	if (f < 0)
		return;
	while ((lkl ? lsys(__lkl__NR_read, f, (long)buf, sizeof buf, 0) : read(f, buf, sizeof buf)) > 0)
		;
	if (lkl)
		lsys(__lkl__NR_close, f, 0, 0, 0);
	else
		close(f);
}

/* walk counts the entries under the directory open at fd, through LKL
 * (lkl != 0) or the host. */
static long walk(int lkl, int fd)
{
	char buf[32768];
	long n = 0;
	for (;;) {
		long k = lkl ? lsys(__lkl__NR_getdents64, fd, (long)buf, sizeof buf, 0)
			     : syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (k <= 0)
			break;
		for (long pos = 0; pos < k;) {
			struct dent *d = (struct dent *)(buf + pos);
			pos += d->reclen;
			if (strcmp(d->name, ".") == 0 || strcmp(d->name, "..") == 0)
				continue;
			n++;
			char st[256];
			long r = lkl ? lsys(__lkl__NR_newfstatat, fd, (long)d->name, (long)st, AT_SYMLINK_NOFOLLOW)
				     : fstatat(fd, d->name, (struct stat *)st, AT_SYMLINK_NOFOLLOW);
			if (r == 0 && d->type == DT_REG && readfiles)
				slurp(lkl, fd, d->name);
			if (r < 0 || d->type != DT_DIR || (readfiles && strcmp(d->name, ".git") == 0))
				continue;
			int sub = lkl ? (int)lsys(__lkl__NR_openat, fd, (long)d->name, O_RDONLY | O_DIRECTORY, 0)
				      : openat(fd, d->name, O_RDONLY | O_DIRECTORY);
			if (sub < 0)
				continue;
			n += walk(lkl, sub);
			if (lkl)
				lsys(__lkl__NR_close, sub, 0, 0, 0);
			else
				close(sub);
		}
	}
	return n;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void run(const char *what, int lkl, const char *dir)
{
	double ms[5];
	long n = 0;
	for (int i = 0; i < 5; i++) {
		double t0 = now_ms();
		int fd = lkl ? (int)lsys(__lkl__NR_openat, AT_FDCWD, (long)dir, O_RDONLY | O_DIRECTORY, 0)
			     : open(dir, O_RDONLY | O_DIRECTORY);
		if (fd < 0) {
			fprintf(stderr, "lkl_floor: %s: open %s failed (%d)\n", what, dir, fd);
			exit(1);
		}
		n = walk(lkl, fd);
		if (lkl)
			lsys(__lkl__NR_close, fd, 0, 0, 0);
		else
			close(fd);
		ms[i] = now_ms() - t0;
	}
	double cold = ms[0];
	qsort(ms + 1, 4, sizeof ms[0], cmp);
	printf("%-7s %ld entries: cold %.1f ms, warm median %.1f ms (%.2f us per entry)\n",
	       what, n, cold, (ms[2] + ms[3]) / 2, (ms[2] + ms[3]) / 2 * 1000 / (n ? n : 1));
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: lkl_floor IMAGE DIR [HOSTTREE [read]]\n");
		return 2;
	}
	readfiles = argc > 4 && strcmp(argv[4], "read") == 0;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	double t0 = now_ms();
	if (floor_boot(cmdline) < 0) {
		fprintf(stderr, "lkl_floor: boot failed\n");
		return 1;
	}
	struct lkl_disk disk = {0};
	disk.fd = fd;
	disk.ops = NULL;
	int id = lkl_disk_add(&disk);
	char mnt[256];
	long r = id < 0 ? id : lkl_mount_dev(id, 0, "ext4", LKL_MS_RDONLY, NULL, mnt, sizeof mnt);
	if (r < 0) {
		fprintf(stderr, "lkl_floor: mounting %s: %s\n", argv[1], lkl_strerror(r));
		return 1;
	}
	printf("boot+mount %.1f ms\n", now_ms() - t0);
	char path[512];
	snprintf(path, sizeof path, "%s%s", mnt, argv[2]);
	run("lkl", 1, path);
	if (argc > 3) {
		snprintf(path, sizeof path, "%s%s", argv[3], argv[2]);
		run("native", 0, path);
	}
	return 0;
}
