/* The device numbers of a bind's files, checked as Linux gives them for a
 * bind mount of another filesystem: every view of a file (stat, fstat,
 * fstatat of an fd, statx of a path and of an fd, /dev/fd/N,
 * /proc/self/fd/N, a copy of the fd, the file's line in /proc/self/maps)
 * gives one device and inode; that device is the one mountinfo gives the
 * bind's mount, and no directory of another filesystem shares it (else
 * find -samefile, cp -a, tar and du take two files for one, and find
 * -xdev walks into the bind). The program checks itself, so it runs
 * natively as in kbox.
 *
 * usage: binddev BIND DIR...
 *   BIND  a writable directory (the bind), alone on its filesystem
 *   DIR   directories of other filesystems (the image's /etc, /tmp, /proc)
 * Prints "FAIL ..." per failed check and "checks N" at the end; exits 1
 * on a failure. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "check.h"

/* checks counts the checks made, printed at the end ("checks N"): a test
 * knows that none was skipped. */
static int checks;

#define CHECKED(cond, name, why)                          \
	do {                                              \
		checks++;                                 \
		CHECK(cond, "%s: %s", name, why);         \
	} while (0)

/* mountdev is the device mountinfo gives the mount holding path p: the
 * mount whose point is the longest prefix of p (the last such line, as a
 * later mount covers an earlier one). 0 when none is found. */
static dev_t mountdev(const char *p)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], point[4096];
	unsigned maj, min;
	size_t best = 0;
	dev_t dev = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%*d %*d %u:%u %*s %4095s", &maj, &min, point) != 3)
			continue;
		size_t n = strlen(point);
		int under = strcmp(point, "/") == 0 ||
			    (strncmp(p, point, n) == 0 && (p[n] == 0 || p[n] == '/'));
		if (under && n >= best) {
			best = n;
			dev = makedev(maj, min);
		}
	}
	fclose(f);
	return dev;
}

/* statxdev is statx's device and inode of (dirfd, path, flags): musl's
 * headers may lack struct statx, so its fields are read by offset. */
static int statxdev(int dirfd, const char *path, int flags, dev_t *dev, uint64_t *ino)
{
	unsigned char sx[256];
	uint32_t maj, min;

	if (syscall(SYS_statx, dirfd, path, flags, 0x7ff, sx) != 0)
		return -1;
	memcpy(ino, sx + 32, 8);
	memcpy(&maj, sx + 136, 4);
	memcpy(&min, sx + 140, 4);
	*dev = makedev(maj, min);
	return 0;
}

/* mapsdev finds the line of /proc/self/maps that maps address a and
 * gives its device and inode. */
static int mapsdev(void *a, dev_t *dev, uint64_t *ino)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	unsigned long lo, hi;
	unsigned maj, min;
	unsigned long long i;
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx %*s %*s %x:%x %llu", &lo, &hi, &maj, &min, &i) == 5 &&
		    lo <= (unsigned long)a && (unsigned long)a < hi) {
			*dev = makedev(maj, min);
			*ino = i;
			found = 1;
		}
	}
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	struct stat sb, sf, s;
	char file[4096], name[4200], link[64];
	dev_t d;
	uint64_t ino;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: binddev BIND DIR...\n");
		return 2;
	}
	snprintf(file, sizeof file, "%s/binddev.f", argv[1]);
	fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "binddev\n", 8) != 8 || stat(argv[1], &sb) || stat(file, &sf)) {
		printf("FAIL set-up: %s: %s\n", file, strerror(errno));
		return 1;
	}
	CHECKED(sf.st_dev == sb.st_dev, "file-on-bind", "a file's device is not its directory's");
	CHECKED(mountdev(argv[1]) == sb.st_dev, "mountinfo", "mountinfo gives the bind another device");
	for (int i = 2; i < argc; i++) {
		snprintf(name, sizeof name, "other-fs %s", argv[i]);
		CHECKED(stat(argv[i], &s) == 0 && s.st_dev != sb.st_dev, name,
		      "a directory of another filesystem has the bind's device");
		snprintf(name, sizeof name, "mountinfo %s", argv[i]);
		CHECKED(stat(argv[i], &s) == 0 && mountdev(argv[i]) == s.st_dev, name,
		      "mountinfo gives its mount another device");
	}
#define SAME(ok, what) CHECKED((ok) && s.st_dev == sf.st_dev && s.st_ino == sf.st_ino, what, \
			     "another device or inode than the file's stat")
	SAME(fstat(fd, &s) == 0, "fstat");
	SAME(fstatat(fd, "", &s, AT_EMPTY_PATH) == 0, "fstatat-empty");
	snprintf(link, sizeof link, "/dev/fd/%d", fd);
	SAME(stat(link, &s) == 0, "dev-fd");
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	SAME(stat(link, &s) == 0, "proc-fd");
	int hi = fcntl(fd, F_DUPFD, 900);
	SAME(hi >= 0 && fstat(hi, &s) == 0, "fstat-dupfd-900");
	int r = statxdev(AT_FDCWD, file, 0, &d, &ino);
	s.st_dev = d, s.st_ino = ino;
	SAME(r == 0, "statx-path");
	r = statxdev(fd, "", AT_EMPTY_PATH, &d, &ino);
	s.st_dev = d, s.st_ino = ino;
	SAME(r == 0, "statx-fd");
	r = statxdev(hi, "", AT_EMPTY_PATH, &d, &ino);
	s.st_dev = d, s.st_ino = ino;
	SAME(r == 0, "statx-dupfd-900");
	void *m = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
	r = m != MAP_FAILED && mapsdev(m, &d, &ino);
	s.st_dev = d, s.st_ino = ino;
	SAME(r, "maps");
	printf("checks %d\n", checks);
	return bad;
}
