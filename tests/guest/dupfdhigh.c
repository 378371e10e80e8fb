/* dupfdhigh: fcntl(F_DUPFD / F_DUPFD_CLOEXEC) of a host fd with a minimum
 * in the virtual fd range (>= 1024) next to the virtual fds the process
 * holds (busybox sh saves a redirected fd 1024 at 1025); one beyond them
 * is EINVAL, as Linux's minimum at or above RLIMIT_NOFILE. kbox keeps a copy of the guest's fd
 * (the same open file description) as a virtual fd: it must share the
 * offset and status flags, serve I/O, fstat (the file's, as a stat of its
 * path), lseek and fcntl, go back to a host number with dup2, drop at exec
 * when close-on-exec, and close.
 * Prints "dupfdhigh ok" when all hold. "dupfdhigh gone FD" (run by exec)
 * checks that FD did not survive the exec. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "gone") == 0) {
		int fd = atoi(argv[2]);
		errno = 0;
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
			printf("dupfdhigh FAIL: fd %d survived exec\n", fd);
			return 1;
		}
		printf("dupfdhigh gone ok\n");
		return 0;
	}
	const char *path = argc > 1 ? argv[1] : "/root/dupfdhigh.txt";
	char buf[64];

	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && fd < 1024, "open %s: fd %d is not a host fd", path, fd);
	CHECK(write(fd, "0123456789", 10) == 10, "write");

	int dir = open("/", O_RDONLY | O_DIRECTORY);
	CHECK(dir >= 1024, "a directory's fd %d is not a virtual fd", dir);
	errno = 0;
	CHECK(fcntl(fd, F_DUPFD, dir + 2) == -1 && errno == EINVAL, "F_DUPFD beyond the virtual fds held");
	int d = fcntl(fd, F_DUPFD, dir + 1);
	CHECK(d >= dir + 1, "F_DUPFD min %d gave %d", dir + 1, d);
	CHECK(fcntl(d, F_GETFD) == 0, "F_DUPFD result is close-on-exec");
	CHECK(lseek(d, 0, SEEK_CUR) == 10, "offset not shared with the original");
	CHECK(lseek(d, 2, SEEK_SET) == 2 && lseek(fd, 0, SEEK_CUR) == 2, "lseek through the copy not seen by the original");
	CHECK(read(d, buf, 3) == 3 && memcmp(buf, "234", 3) == 0, "read through the copy");
	CHECK(lseek(fd, 0, SEEK_END) == 10 && write(d, "AB", 2) == 2, "write through the copy");
	CHECK(pread(d, buf, 4, 9) == 3 && memcmp(buf, "9AB", 3) == 0, "pread through the copy");
	CHECK(pwrite(d, "xy", 2, 0) == 2 && pread(fd, buf, 2, 0) == 2 && memcmp(buf, "xy", 2) == 0, "pwrite through the copy");
	struct stat a, b, p;
	CHECK(fstat(fd, &a) == 0 && fstat(d, &b) == 0 && a.st_ino == b.st_ino && b.st_size == 12, "fstat of the copy");
	CHECK(stat(path, &p) == 0 && a.st_dev == p.st_dev && a.st_ino == p.st_ino && b.st_dev == p.st_dev &&
	          b.st_ino == p.st_ino && b.st_mode == p.st_mode,
	      "fstat of the fd or its copy is not the path's stat");
	CHECK(fcntl(d, F_SETFL, O_APPEND) == 0 && (fcntl(fd, F_GETFL) & O_APPEND), "F_SETFL through the copy not shared");
	CHECK(fcntl(fd, F_SETFL, 0) == 0 && (fcntl(d, F_GETFL) & O_APPEND) == 0, "F_SETFL on the original not shared");
	CHECK((fcntl(d, F_GETFL) & O_ACCMODE) == O_RDWR, "F_GETFL access mode");

	int e = fcntl(d, F_DUPFD_CLOEXEC, d + 1);
	CHECK(e > d && fcntl(e, F_GETFD) == FD_CLOEXEC, "F_DUPFD_CLOEXEC of the copy: %d", e);
	int c = fcntl(0, F_DUPFD_CLOEXEC, 1025);
	CHECK(c >= 1025 && fcntl(c, F_GETFD) == FD_CLOEXEC, "F_DUPFD_CLOEXEC of stdin: %d", c);
	errno = 0;
	CHECK(fcntl(0, F_DUPFD_CLOEXEC, 100000) == -1 && errno == EINVAL, "F_DUPFD_CLOEXEC far beyond the virtual fds held");
	CHECK(dup2(d, 20) == 20 && lseek(20, 5, SEEK_SET) == 5 && lseek(fd, 0, SEEK_CUR) == 5, "dup2 of the copy onto fd 20");
	CHECK(close(d) == 0 && lseek(20, 0, SEEK_CUR) == 5, "fd 20 after closing the copy");
	errno = 0;
	CHECK(fcntl(d, F_GETFD) == -1 && errno == EBADF, "closed copy still open");
	errno = 0;
	CHECK(fcntl(77, F_DUPFD, 1025) == -1 && errno == EBADF, "F_DUPFD of a closed host fd");
	errno = 0;
	CHECK(fcntl(77, F_DUPFD, 100000) == -1 && errno == EBADF, "F_DUPFD of a closed host fd: EBADF before EINVAL");
	errno = 0;
	CHECK(fcntl(fd, F_DUPFD, -1) == -1 && errno == EINVAL, "F_DUPFD with a negative minimum");
	int lo = fcntl(fd, F_DUPFD, 100);
	CHECK(lo >= 100 && lo < 1024, "F_DUPFD min 100 (native) gave %d", lo);
	close(lo);
	close(20);
	close(fd);
	fflush(stdout);
	if (bad)
		return 1;
	printf("dupfdhigh ok\n");
	fflush(stdout);
	/* The close-on-exec copies go at exec. */
	char num[16];
	snprintf(num, sizeof num, "%d", c);
	execl("/proc/self/exe", "dupfdhigh", "gone", num, (char *)0);
	perror("exec");
	return 1;
}
