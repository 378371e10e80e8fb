/*
 * xattrfacts DIR: a get of an extended attribute answers the same right
 * after a stat of the path (as ls -l asks: statx, then lgetxattr and
 * getxattr) as after a call that changes nothing it knows of
 * (tests/xattr_test.go, TestXattrAfterStat). kbox answers security.* and
 * POSIX ACL names of a file without extended attributes from what a stat
 * and a listxattr told it (dispatch/xattr_facts.go); this compares those
 * answers with LKL's own, in DIR (a writable directory), on
 *
 *   f  a file without names, l  a symlink to it, d  a directory,
 *   u  a file with user.k, s  a file with security.k (where the
 *   filesystem takes one),
 *
 * each name asked by path and by link, each way after a statx, after an
 * lstat and after a getdents (which kbox counts as a change). Then a name
 * set after the answer was known is found. Prints one line per question,
 * "NAME FORM FILE: ANSWER", and FAIL lines.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"

static int dfd;

/* ask gets name of path (link: without following it) and writes the
 * answer into out: "value" or an errno name. */
static void ask(const char *path, int link, const char *name, char *out, size_t n)
{
	char v[256];
	ssize_t r = link ? lgetxattr(path, name, v, sizeof v - 1) : getxattr(path, name, v, sizeof v - 1);
	if (r < 0)
		snprintf(out, n, "%s", errname(errno));
	else {
		v[r] = 0;
		snprintf(out, n, "=%s", v);
	}
}

/* statx_ is statx(2) of path, its last link not followed, as ls asks. */
static int statx_(const char *path)
{
	char sx[256]; /* struct statx: musl's headers may lack it */
	return syscall(SYS_statx, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, 0x7ff, sx);
}

/* unsettle makes a call kbox does not count as pure: whatever it knew of
 * paths is forgotten. */
static void unsettle(void)
{
	char buf[4096];
	lseek(dfd, 0, SEEK_SET);
	syscall(SYS_getdents64, dfd, buf, sizeof buf);
}

int main(int argc, char **argv)
{
	REQUIRE(argc == 2, "usage: xattrfacts DIR");
	REQUIRE(mkdir(argv[1], 0755) == 0 || errno == EEXIST, "mkdir %s", argv[1]);
	REQUIRE(chdir(argv[1]) == 0, "chdir %s", argv[1]);
	dfd = open(".", O_RDONLY | O_DIRECTORY);
	REQUIRE(dfd >= 0, "open .");
	unlink("f"), unlink("l"), unlink("u"), unlink("s"), rmdir("d");
	REQUIRE(close(open("f", O_CREAT | O_WRONLY, 0644)) == 0, "create f");
	REQUIRE(symlink("f", "l") == 0, "symlink");
	REQUIRE(mkdir("d", 0755) == 0, "mkdir");
	REQUIRE(close(open("u", O_CREAT | O_WRONLY, 0644)) == 0, "create u");
	REQUIRE(close(open("s", O_CREAT | O_WRONLY, 0644)) == 0, "create s");
	CHECK(setxattr("u", "user.k", "1", 1, 0) == 0, "setxattr user.k");
	int secure = setxattr("s", "security.k", "2", 1, 0) == 0;
	printf("security.k set: %s\n", secure ? "yes" : errname(errno));

	const char *files[] = {"f", "l", "d", "u", "s"};
	const char *names[] = {"security.selinux", "security.k", "system.posix_acl_access", "system.posix_acl_default"};
	for (int fi = 0; fi < 5; fi++)
		for (int ni = 0; ni < 4; ni++)
			for (int link = 1; link >= 0; link--) {
				char cold[300], afterx[300], afterl[300];
				struct stat st;
				unsettle();
				ask(files[fi], link, names[ni], cold, sizeof cold);
				unsettle();
				CHECK(statx_(files[fi]) == 0, "statx %s", files[fi]);
				ask(files[fi], link, names[ni], afterx, sizeof afterx);
				unsettle();
				CHECK(lstat(files[fi], &st) == 0, "lstat %s", files[fi]);
				ask(files[fi], link, names[ni], afterl, sizeof afterl);
				printf("%s %s %s: %s\n", names[ni], link ? "link" : "path", files[fi], cold);
				CHECK(!strcmp(cold, afterx) && !strcmp(cold, afterl),
				      "%s of %s (%s): %s alone, %s after statx, %s after lstat",
				      names[ni], files[fi], link ? "link" : "path", cold, afterx, afterl);
			}

	/* A name set after kbox knew the file had none. */
	char got[300];
	unsettle();
	CHECK(statx_("f") == 0, "statx f");
	ask("f", 1, "security.k", got, sizeof got);
	CHECK(!strcmp(got, "ENODATA") || !secure, "security.k of f: %s", got);
	if (secure) {
		CHECK(setxattr("f", "security.k", "3", 1, 0) == 0, "setxattr f");
		ask("f", 1, "security.k", got, sizeof got);
		CHECK(!strcmp(got, "=3"), "security.k of f after its set: %s", got);
		CHECK(statx_("f") == 0, "statx f");
		ask("f", 0, "security.k", got, sizeof got);
		CHECK(!strcmp(got, "=3"), "security.k of f after its set, by path: %s", got);
	}
	unlink("f"), unlink("l"), unlink("u"), unlink("s"), rmdir("d");
	return bad;
}
