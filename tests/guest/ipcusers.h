/*
 * ipcusers.h: what ipcperm.c and mqperm.c share: R prints a call's
 * outcome as one line ("what: ok" or "what: ERRNO"), become drops to a
 * user, group and supplementary groups, wait_child waits for a child
 * that must exit 0.
 */
#ifndef KBOX_IPCUSERS_H
#define KBOX_IPCUSERS_H

#include <grp.h>
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

#endif
