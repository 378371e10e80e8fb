/*
 * lockvirt: record locks and flock between processes on files kbox
 * serves as virtual fds (above KBOX_SHADOW_MAX; tests/lockvirt_test.go
 * runs it with a cap of 4 KiB), compared line by line with the same
 * program run natively. A lock on such a file used to be ENOLCK (fcntl)
 * or granted to everyone (flock): SQLite could not use a database above
 * 64 MiB.
 *
 * Usage: lockvirt DIR make   writes DIR/f (8 KiB) and exits;
 *        lockvirt DIR        locks between a parent and its children;
 *        lockvirt DIR solo   one process's own locks (the in-process
 *                            tiers).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char f[256];

static int setlk(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock l = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};

	return fcntl(fd, cmd, &l);
}

static void show(const char *what, int r)
{
	printf("%s: %s\n", what, r < 0 ? errname(errno) : "ok");
}

/* runs child in a new process and waits for it */
static void in_child(void (*child)(void))
{
	pid_t pid = fork();
	int st;

	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		child();
		fflush(stdout);
		_exit(bad);
	}
	CHECK(waitpid(pid, &st, 0) == pid && st == 0, "child status %d", st);
}

static void conflicts(void)
{
	int fd = open(f, O_RDWR);
	struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10};

	show("child: a write lock inside the parent's", setlk(fd, F_SETLK, F_WRLCK, 50, 10));
	CHECK(fcntl(fd, F_GETLK, &l) == 0, "F_GETLK");
	printf("child: F_GETLK finds a %s lock of %s\n", l.l_type == F_WRLCK ? "write" : "other",
	       l.l_pid == getppid() ? "the parent" : "someone else");
	show("child: a write lock past the parent's", setlk(fd, F_SETLK, F_WRLCK, 200, 100));
	show("child: flock, not waiting", flock(fd, LOCK_EX | LOCK_NB));
	show("child: an OFD lock inside the parent's", setlk(fd, F_OFD_SETLK, F_WRLCK, 500, 1));
	close(fd);
}

static void after_close(void)
{
	int fd = open(f, O_RDWR);

	show("child: the same write lock after the parent's close", setlk(fd, F_SETLK, F_WRLCK, 50, 10));
	show("child: flock after the parent's LOCK_UN", flock(fd, LOCK_EX | LOCK_NB));
	close(fd);
}

static void after_other_close(void)
{
	int fd = open(f, O_RDWR);

	show("child: the same write lock after the parent closed an fd of the file", setlk(fd, F_SETLK, F_WRLCK, 50, 10));
	close(fd);
}

static void waits(void)
{
	int fd = open(f, O_RDWR);

	show("child: F_SETLKW, until the parent lets go", setlk(fd, F_SETLKW, F_WRLCK, 0, 1));
	close(fd);
}

static void holds_and_exits(void)
{
	int fd = open(f, O_RDWR);

	show("child: a lock it keeps at its exit", setlk(fd, F_SETLK, F_WRLCK, 1000, 1));
}

static void solo(int fd)
{
	int ro = open(f, O_RDONLY);
	struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};

	show("a write lock", setlk(fd, F_SETLK, F_WRLCK, 0, 100));
	CHECK(fcntl(fd, F_GETLK, &l) == 0, "F_GETLK");
	printf("F_GETLK of its own lock: %s\n", l.l_type == F_UNLCK ? "unlocked" : "locked");
	show("a read lock on a read-only fd", setlk(ro, F_SETLK, F_RDLCK, 0, 10));
	show("a write lock on a read-only fd", setlk(ro, F_SETLK, F_WRLCK, 0, 10));
	show("unlock", setlk(fd, F_SETLK, F_UNLCK, 0, 0));
	close(ro);
	ro = open(f, O_PATH);
	show("flock of an O_PATH fd", flock(ro, LOCK_EX));
	close(ro);
}

int main(int argc, char **argv)
{
	static char buf[8192];
	int fd, d, dir, p[2], r;
	char c;

	REQUIRE(argc >= 2, "usage: lockvirt DIR [make|solo]");
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(f, sizeof f, "%s/f", argv[1]);
	if (argc == 3 && strcmp(argv[2], "make") == 0) {
		fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		REQUIRE(fd >= 0 && write(fd, buf, sizeof buf) == sizeof buf && close(fd) == 0, "write %s", f);
		return bad;
	}
	fd = open(f, O_RDWR);
	REQUIRE(fd >= 0, "open %s", f);
	if (argc == 3 && strcmp(argv[2], "solo") == 0) {
		solo(fd);
		return bad;
	}
	show("parent: a write lock", setlk(fd, F_SETLK, F_WRLCK, 0, 100));
	show("parent: flock", flock(fd, LOCK_EX));
	show("parent: an OFD lock", setlk(fd, F_OFD_SETLK, F_WRLCK, 500, 1));
	d = dup(fd);
	show("parent: the same OFD lock through a dup", setlk(d, F_OFD_SETLK, F_WRLCK, 500, 1));
	in_child(conflicts);
	show("parent: LOCK_UN", flock(fd, LOCK_UN));
	close(d);
	close(fd); /* drops the parent's POSIX locks */
	in_child(after_close);

	fd = open(f, O_RDWR);
	show("parent: a lock the child waits for", setlk(fd, F_SETLK, F_WRLCK, 0, 1));
	REQUIRE(pipe(p) == 0, "pipe");
	if (fork() == 0) {
		close(p[0]);
		waits();
		CHECK(write(p[1], "x", 1) == 1, "write");
		_exit(bad);
	}
	close(p[1]);
	usleep(100 * 1000);
	r = setlk(fd, F_SETLK, F_UNLCK, 0, 1);
	CHECK(read(p[0], &c, 1) == 1, "read"); /* the child has its lock */
	wait(NULL);
	show("parent: unlock, for the child", r);

	in_child(holds_and_exits);
	show("parent: the exited child's range", setlk(fd, F_SETLK, F_WRLCK, 1000, 1));
	/* A close of any fd of the file drops the process's POSIX locks. */
	show("parent: a write lock, then a close of another fd of the file", setlk(fd, F_SETLK, F_WRLCK, 50, 10));
	d = open(f, O_RDONLY);
	close(d);
	in_child(after_other_close);
	/* And so does a dup2 onto the fd that took them. */
	show("parent: a write lock, then a dup2 onto its fd", setlk(fd, F_SETLK, F_WRLCK, 50, 10));
	d = open(f, O_RDWR);
	CHECK(dup2(d, fd) == fd, "dup2");
	in_child(after_other_close); /* before d's close, which would drop them too */
	close(d);
	close(fd);

	dir = open(argv[1], O_RDONLY | O_DIRECTORY);
	show("parent: flock of the directory", flock(dir, LOCK_EX));
	if (fork() == 0) {
		int mine = open(argv[1], O_RDONLY | O_DIRECTORY);

		show("child: flock of the directory, not waiting", flock(mine, LOCK_EX | LOCK_NB));
		_exit(0);
	}
	wait(NULL);
	fd = open(f, O_RDONLY);
	show("parent: a write lock on a read-only fd", setlk(fd, F_SETLK, F_WRLCK, 0, 1));
	close(fd);
	fd = open(f, O_PATH);
	show("parent: flock of an O_PATH fd", flock(fd, LOCK_EX));
	return bad;
}
