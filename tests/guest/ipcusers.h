/*
 * ipcusers.h: what ipcperm.c and mqperm.c share: R prints a call's
 * outcome as one line ("what: ok" or "what: ERRNO"), become drops to a
 * user, group and supplementary groups, wait_child waits for a child
 * that must exit 0, readnum and writenum read and write a number in a
 * file (the IPC namespace's limits in /proc/sys).
 */
#ifndef KBOX_IPCUSERS_H
#define KBOX_IPCUSERS_H

#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define NOBODY 65534
#define USER 1000
#define GROUP 4321

/* R prints what's result: ok for a call that did not fail. */
#define R(what, call)                                                           \
	do {                                                                    \
		errno = 0;                                                      \
		long r_ = (long)(call);                                         \
		printf("%s: %s\n", what, r_ == -1 ? errname(errno) : "ok");       \
	} while (0)

/* become drops to uid and gid with the supplementary groups given. */
static void become(uid_t uid, gid_t gid, int ngroups, const gid_t *groups)
{
	REQUIRE(setgroups(ngroups, groups) == 0, "setgroups");
	REQUIRE(setresgid(gid, gid, gid) == 0, "setresgid");
	REQUIRE(setresuid(uid, uid, uid) == 0, "setresuid");
}

static void wait_child(pid_t pid)
{
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	fflush(stdout);
}

/* readnum reads a number from file p (-1 if it cannot). */
static long readnum(const char *p)
{
	char buf[64];
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return atol(buf);
}

/* writenum writes v to file p. */
static int writenum(const char *p, long v)
{
	char buf[32];
	int fd = open(p, O_WRONLY);
	if (fd < 0)
		return -1;
	int n = snprintf(buf, sizeof(buf), "%ld\n", v);
	int r = write(fd, buf, n) == n ? 0 : -1;
	close(fd);
	return r;
}

#endif
