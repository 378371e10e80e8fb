/*
 * fdchange: a file's mode, owner and times change through an fd as on
 * Linux: chmod, chown and utimensat of /proc/self/fd/N follow the link to
 * the fd's file, fchownat, fchmodat2 and utimensat with AT_EMPTY_PATH and
 * "" change the fd's own file, and libc's fchmodat(AT_SYMLINK_NOFOLLOW)
 * (an O_PATH open, then a chmod of /proc/self/fd/N: GNU tar's directory
 * modes) works. For a directory and a file through O_PATH fds, a file
 * open for reading, and as nobody (EPERM). One line per call, compared
 * with the same program run natively (tests/fdchange_test.go).
 *
 * Usage: fdchange DIR [make|one]. DIR/f (10,000 bytes) is written unless
 * it exists; with "make" that is all; with "one" nothing runs as nobody
 * (that needs a fork). Written by another process that has
 * exited, it is a virtual fd above KBOX_SHADOW_MAX=4096.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static const char *what;
static int one; /* one process: no fork (the in-process tiers) */

static void show(const char *call, long r)
{
	struct stat st;

	if (r < 0) {
		printf("%s %s: %s\n", what, call, errname(errno));
		return;
	}
	REQUIRE(stat(what, &st) == 0, "stat %s", what);
	printf("%s %s: mode %o uid %d mtime %ld\n", what, call, (int)(st.st_mode & 07777), (int)st.st_uid,
	       (long)st.st_mtime);
}

static void changes(const char *path, int flags)
{
	char link[64];
	struct timespec ts[2] = {{1000, 0}, {2000, 0}};
	int fd = open(path, flags);

	REQUIRE(fd >= 0, "open %s", path);
	REQUIRE(utimensat(AT_FDCWD, path, ts, 0) == 0, "times of %s", path);
	what = path;
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	show("chmod link", chmod(link, 0750));
	show("chown link", chown(link, 1, 1));
	ts[1].tv_sec = 3000;
	show("utimensat link", utimensat(AT_FDCWD, link, ts, 0));
	show("fchmodat nofollow", fchmodat(AT_FDCWD, path, 0705, AT_SYMLINK_NOFOLLOW));
	show("fchownat empty", fchownat(fd, "", 3, 3, AT_EMPTY_PATH));
	show("fchownat empty nofollow", fchownat(fd, "", 0, 0, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
	show("fchmodat2 empty", syscall(452, fd, "", 0755, AT_EMPTY_PATH));
	ts[1].tv_sec = 4000;
	show("utimensat empty", utimensat(fd, "", ts, AT_EMPTY_PATH));
	show("fchownat empty, no flag", fchownat(fd, "", 0, 0, 0));
	show("fchownat empty, closed fd", fchownat(900, "", 0, 0, AT_EMPTY_PATH));
	if (!one && fork() == 0) {
		REQUIRE(setuid(65534) == 0, "setuid");
		show("chmod link as nobody", chmod(link, 0700));
		show("fchownat empty as nobody", fchownat(fd, "", 0, 0, AT_EMPTY_PATH));
		_exit(0);
	}
	wait(NULL);
	close(fd);
}

int main(int argc, char **argv)
{
	static char zeros[10000];
	char d[4096], f[4096];
	int w;

	REQUIRE(argc >= 2, "usage: fdchange DIR [make]");
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(d, sizeof d, "%s/d", argv[1]);
	snprintf(f, sizeof f, "%s/f", argv[1]);
	mkdir(argv[1], 0755);
	mkdir(d, 0700);
	if (access(f, F_OK) != 0) {
		w = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		REQUIRE(w >= 0 && write(w, zeros, sizeof zeros) == sizeof zeros, "write %s", f);
		close(w);
	}
	if (argc > 2 && strcmp(argv[2], "make") == 0)
		return 0;
	one = argc > 2 && strcmp(argv[2], "one") == 0;
	close(900);
	changes(d, O_PATH);
	changes(d, O_RDONLY | O_DIRECTORY);
	changes(f, O_PATH);
	changes(f, O_RDONLY);
	return 0;
}
