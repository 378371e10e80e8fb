/* fcntl64: POSIX and open-file-description locks with 64-bit offsets, and
 * F_NOTIFY, as Linux has them. "fcntl64 FILE DIR" locks ranges of FILE
 * (made, 4 KiB long) beyond 2^31 up to the largest offset, with the
 * errors Linux gives at its limits (EINVAL for a negative start, EOVERFLOW
 * past the largest offset, EBADF for a write lock on a read-only fd), reads
 * them back with F_GETLK and F_OFD_GETLK, and asks F_NOTIFY of DIR and
 * FILE. One line per row: "NAME RESULT", RESULT being "ok", an errno name,
 * or for a GETLK the lock it reports ("type=W start=S len=L pid=self|-1").
 * The same binary natively gives the same lines. "fcntl64 FILE DIR watch"
 * prints one row more: a watch of DIR (DN_CREATE), which Linux sets. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static void row(const char *name, int r)
{
	printf("%s %s\n", name, r < 0 ? errname(errno) : "ok");
}

static int lk(int fd, int cmd, short type, short whence, long long start, long long len)
{
	struct flock f;
	memset(&f, 0, sizeof f);
	f.l_type = type;
	f.l_whence = whence;
	f.l_start = start;
	f.l_len = len;
	return fcntl(fd, cmd, &f);
}

static void getlk(const char *name, int fd, int cmd, short type, long long start, long long len)
{
	struct flock f;
	memset(&f, 0, sizeof f);
	f.l_type = type;
	f.l_whence = SEEK_SET;
	f.l_start = start;
	f.l_len = len;
	if (fcntl(fd, cmd, &f) < 0) {
		printf("%s %s\n", name, errname(errno));
		return;
	}
	const char *t = f.l_type == F_UNLCK ? "U" : f.l_type == F_RDLCK ? "R" : "W";
	char pid[16];
	if (f.l_pid == getpid())
		strcpy(pid, "self");
	else
		snprintf(pid, sizeof pid, "%d", (int)f.l_pid);
	printf("%s type=%s start=%lld len=%lld pid=%s\n", name, t, (long long)f.l_start, (long long)f.l_len, pid);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fcntl64 FILE DIR [watch]\n");
		return 2;
	}
	const long long G2 = 1LL << 31, T40 = 1LL << 40;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	int ofd = open(argv[1], O_RDWR);  /* another open file: OFD locks of their own */
	int rfd = open(argv[1], O_RDONLY); /* read-only */
	if (fd < 0 || ofd < 0 || rfd < 0 || ftruncate(fd, 4096) < 0) {
		perror("fcntl64: open");
		return 1;
	}
	/* POSIX locks of this process. */
	row("setlk-2g", lk(fd, F_SETLK, F_WRLCK, SEEK_SET, G2 + 5, 100));
	row("setlk-4g-to-eof", lk(fd, F_SETLK, F_RDLCK, SEEK_SET, 1LL << 32, 0));
	row("setlk-1t", lk(fd, F_SETLK, F_WRLCK, SEEK_SET, T40, T40));
	row("setlk-max-1", lk(fd, F_SETLK, F_WRLCK, SEEK_SET, INT64_MAX, 1));
	row("setlk-past-max", lk(fd, F_SETLK, F_WRLCK, SEEK_SET, INT64_MAX - 10, 20));
	row("setlk-negative", lk(fd, F_SETLK, F_WRLCK, SEEK_SET, -1, 1));
	row("setlk-len-back", lk(fd, F_SETLK, F_WRLCK, SEEK_SET, T40, -(T40 / 2)));
	row("setlk-len-before-0", lk(fd, F_SETLK, F_WRLCK, SEEK_SET, 100, -200));
	row("setlk-end-negative", lk(fd, F_SETLK, F_WRLCK, SEEK_END, -8192, 1));
	row("setlk-end-2g", lk(fd, F_SETLK, F_WRLCK, SEEK_END, G2, 10));
	lseek(fd, 1LL << 33, SEEK_SET);
	row("setlk-cur-past-max", lk(fd, F_SETLK, F_WRLCK, SEEK_CUR, INT64_MAX, 1));
	row("setlk-cur-8g", lk(fd, F_SETLK, F_WRLCK, SEEK_CUR, 16, 16));
	row("setlk-bad-whence", lk(fd, F_SETLK, F_WRLCK, 7, 0, 1));
	row("setlk-bad-type", lk(fd, F_SETLK, 9, SEEK_SET, 0, 1));
	row("setlk-write-on-rdonly", lk(rfd, F_SETLK, F_WRLCK, SEEK_SET, G2, 1));
	row("setlkw-free", lk(fd, F_SETLKW, F_WRLCK, SEEK_SET, 3 * G2, 1));
	/* Another owner (an open file description) sees them. */
	getlk("ofd-getlk-2g", ofd, F_OFD_GETLK, F_WRLCK, G2, 10);
	getlk("ofd-getlk-1t", ofd, F_OFD_GETLK, F_RDLCK, T40 + 7, 1);
	getlk("ofd-getlk-max", ofd, F_OFD_GETLK, F_WRLCK, INT64_MAX, 1);
	getlk("ofd-getlk-free", ofd, F_OFD_GETLK, F_WRLCK, T40 / 2, 1);
	row("ofd-setlk-conflict", lk(ofd, F_OFD_SETLK, F_WRLCK, SEEK_SET, T40, 1));
	row("ofd-setlk-6g", lk(ofd, F_OFD_SETLK, F_WRLCK, SEEK_SET, 6 * G2, G2));
	row("ofd-setlkw-7g", lk(ofd, F_OFD_SETLKW, F_RDLCK, SEEK_SET, 7 * G2 + 1, 1));
	struct flock p = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1, .l_pid = 1};
	row("ofd-setlk-pid", fcntl(ofd, F_OFD_SETLK, &p));
	getlk("getlk-ofd-6g", fd, F_GETLK, F_RDLCK, 6 * G2 + 3, 1);
	getlk("getlk-own", fd, F_GETLK, F_WRLCK, G2 + 5, 1);
	row("setlk-unlock-all", lk(fd, F_SETLK, F_UNLCK, SEEK_SET, 0, 0));
	getlk("ofd-getlk-after-unlock", ofd, F_OFD_GETLK, F_WRLCK, T40, 1);
	row("setlk-bad-pointer", fcntl(fd, F_SETLK, (void *)8));
	/* F_NOTIFY: no event asked removes the fd's watches (none): 0; an
	 * event needs a directory. */
	int d = open(argv[2], O_RDONLY | O_DIRECTORY);
	row("notify-dir-multishot", fcntl(d, F_NOTIFY, DN_MULTISHOT));
	row("notify-dir-none", fcntl(d, F_NOTIFY, 0));
	row("notify-file-multishot", fcntl(fd, F_NOTIFY, DN_MULTISHOT));
	row("notify-file-create", fcntl(fd, F_NOTIFY, DN_CREATE));
	int pd = open(argv[2], O_PATH);
	row("notify-opath", fcntl(pd, F_NOTIFY, DN_MULTISHOT));
	row("setlk-opath", lk(pd, F_SETLK, F_RDLCK, SEEK_SET, 0, 1));
	if (argc > 3)
		row("notify-dir-create", fcntl(d, F_NOTIFY, DN_CREATE | DN_MULTISHOT));
	return 0;
}
