/*
 * xattrahead DIR: gets that follow a statx of the same path string (ls
 * -l's pattern) answer as Linux does when what they ask is no longer what
 * the statx saw (tests/xattr_test.go, TestXattrAhead). The rewrite tier
 * answers such gets ahead, without Go, from answers the statx prepared
 * (dispatch/hint.go, trap/hint.c); each case here runs on a thread of its
 * own that first shows the pattern (so that its answers are prepared),
 * then changes what the next get asks:
 *
 *   set      the name set on the file after the statx (this thread);
 *   other    the same, by another thread;
 *   rewrite  the same path buffer, holding another file's name;
 *   symlink  a symlink's statx, then a get that follows it;
 *   chdir    a relative path, the cwd changed after the statx;
 *   badpath  the path a bad pointer, or running into unmapped memory;
 *   badname  the name so;
 *   value    a bad value buffer and a huge size (Linux: ENODATA);
 *
 * in DIR, a writable directory. Prints "CASE: ok" lines and FAIL lines.
 *
 * xattrahead DIR make: fills DIR for ls -lR to list (TestXattrAheadListing):
 * 300 files, of which some have a POSIX ACL, some security.selinux, some
 * user.k, a directory with a default ACL, and symlinks. Prints what it
 * could set ("acl yes", "selinux yes").
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"

#define SEL "security.selinux"
#define ACL "system.posix_acl_access"
#define NPLAIN 300

static int statx_(const char *path, int flags)
{
	char sx[256]; /* struct statx: musl's headers may lack it */
	return syscall(SYS_statx, AT_FDCWD, path, flags, 0x7ff, sx);
}

/* get is [l]getxattr(path, name) as a string: "=value" or an errno name. */
static const char *get(const char *path, const char *name, int link)
{
	static __thread char out[300];
	char v[256];
	ssize_t r = link ? lgetxattr(path, name, v, sizeof v - 1) : getxattr(path, name, v, sizeof v - 1);
	if (r < 0)
		return errname(errno);
	v[r] = 0;
	snprintf(out, sizeof out, "=%s", v);
	return out;
}

/* pattern does what ls -l does for some files without names: statx,
 * lgetxattr, getxattr; each get must fail with ENODATA. */
static void pattern(int from, int n)
{
	char p[32];
	for (int i = from; i < from + n; i++) {
		snprintf(p, sizeof p, "p%d", i % NPLAIN);
		CHECK(statx_(p, AT_SYMLINK_NOFOLLOW) == 0, "statx %s", p);
		const char *a = get(p, SEL, 1), *b = get(p, ACL, 0);
		CHECK(!strcmp(a, "ENODATA") && !strcmp(b, "ENODATA"), "%s: %s %s, want ENODATA", p, a, b);
	}
}

static void want(const char *what, const char *got, const char *wanted)
{
	CHECK(!strcmp(got, wanted), "%s: %s, want %s", what, got, wanted);
}

static void *set_sel(void *arg)
{
	CHECK(setxattr((char *)arg, SEL, "other", 5, 0) == 0, "setxattr %s from a thread", (char *)arg);
	return NULL;
}

static char *edge; /* a page whose next page is unmapped */

static void *run(void *arg)
{
	const char *c = arg;
	pattern(0, 12);
	char p[32];
	if (!strcmp(c, "set")) {
		CHECK(statx_("s1", AT_SYMLINK_NOFOLLOW) == 0, "statx s1");
		CHECK(setxattr("s1", SEL, "v", 1, 0) == 0, "setxattr s1");
		want("lgetxattr after set", get("s1", SEL, 1), "=v");
		want("getxattr after set", get("s1", SEL, 0), "=v");
	} else if (!strcmp(c, "other")) {
		pthread_t t;
		CHECK(statx_("s2", AT_SYMLINK_NOFOLLOW) == 0, "statx s2");
		pthread_create(&t, NULL, set_sel, "s2");
		pthread_join(t, NULL);
		want("lgetxattr after another thread's set", get("s2", SEL, 1), "=other");
	} else if (!strcmp(c, "rewrite")) {
		strcpy(p, "p7");
		CHECK(statx_(p, AT_SYMLINK_NOFOLLOW) == 0, "statx p7");
		strcpy(p, "t7"); /* t7 has the name */
		want("lgetxattr of the rewritten buffer", get(p, SEL, 1), "=t");
		strcpy(p, "p7x");
		want("lgetxattr of the buffer made longer", get(p, SEL, 1), "ENOENT");
	} else if (!strcmp(c, "symlink")) {
		CHECK(statx_("l7", AT_SYMLINK_NOFOLLOW) == 0, "statx l7");
		want("getxattr through the symlink", get("l7", SEL, 0), "=t");
		want("lgetxattr of the symlink", get("l7", SEL, 1), "ENODATA");
		CHECK(statx_("l7", 0) == 0, "statx l7, followed");
		want("getxattr through the symlink, followed statx", get("l7", SEL, 0), "=t");
	} else if (!strcmp(c, "chdir")) {
		CHECK(statx_("c1", AT_SYMLINK_NOFOLLOW) == 0, "statx c1");
		CHECK(chdir("sub") == 0, "chdir sub");
		want("lgetxattr after chdir", get("c1", SEL, 1), "=sub");
		CHECK(chdir("..") == 0, "chdir ..");
	} else if (!strcmp(c, "badpath")) {
		CHECK(statx_("p3", AT_SYMLINK_NOFOLLOW) == 0, "statx p3");
		want("lgetxattr of a NULL path", errname(lgetxattr(NULL, SEL, p, 8) < 0 ? errno : 0), "EFAULT");
		CHECK(statx_("p3", AT_SYMLINK_NOFOLLOW) == 0, "statx p3");
		want("lgetxattr of a bad path", errname(lgetxattr((char *)8, SEL, p, 8) < 0 ? errno : 0), "EFAULT");
		/* "p3" with no NUL before unmapped memory. */
		memcpy(edge + 4096 - 2, "p3", 2);
		CHECK(statx_("p3", AT_SYMLINK_NOFOLLOW) == 0, "statx p3");
		want("lgetxattr of a path at the end of memory", errname(lgetxattr(edge + 4096 - 2, SEL, p, 8) < 0 ? errno : 0), "EFAULT");
		memcpy(edge + 4096 - 3, "p3", 3);
		CHECK(statx_("p3", AT_SYMLINK_NOFOLLOW) == 0, "statx p3");
		want("lgetxattr of a path ending at the end of memory", get(edge + 4096 - 3, SEL, 1), "ENODATA");
	} else if (!strcmp(c, "badname")) {
		CHECK(statx_("p4", AT_SYMLINK_NOFOLLOW) == 0, "statx p4");
		want("lgetxattr of a NULL name", errname(lgetxattr("p4", NULL, p, 8) < 0 ? errno : 0), "EFAULT");
		memcpy(edge + 4096 - strlen(SEL), SEL, strlen(SEL));
		CHECK(statx_("p4", AT_SYMLINK_NOFOLLOW) == 0, "statx p4");
		want("lgetxattr of a name at the end of memory", errname(lgetxattr("p4", edge + 4096 - strlen(SEL), p, 8) < 0 ? errno : 0), "EFAULT");
		CHECK(statx_("p4", AT_SYMLINK_NOFOLLOW) == 0, "statx p4");
		want("lgetxattr of user.k", get("p4", "user.k", 1), "ENODATA");
		CHECK(statx_("p4", AT_SYMLINK_NOFOLLOW) == 0, "statx p4");
		want("lgetxattr of security.selinu", get("p4", "security.selinu", 1), "ENODATA");
	} else if (!strcmp(c, "value")) {
		CHECK(statx_("p5", AT_SYMLINK_NOFOLLOW) == 0, "statx p5");
		want("lgetxattr into a bad buffer", errname(lgetxattr("p5", SEL, (void *)8, 100) < 0 ? errno : 0), "ENODATA");
		want("getxattr of a huge size", errname(getxattr("p5", ACL, p, SIZE_MAX) < 0 ? errno : 0), "ENODATA");
	}
	pattern(12, 3);
	return NULL;
}

/* An access ACL (or a default one): owner rw, user 1000 r, group r,
 * mask r, others r; struct posix_acl_xattr_header and entries. */
static const unsigned char acl[] = {
	2, 0, 0, 0,
	1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
	2, 0, 4, 0, 0xe8, 3, 0, 0,
	4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
	0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
	0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
};

static int make(void)
{
	char p[64];
	int acls = 0, sels = 0;
	REQUIRE(mkdir("d", 0755) == 0 || errno == EEXIST, "mkdir d");
	acls += setxattr("d", "system.posix_acl_default", acl, sizeof acl, 0) == 0;
	for (int i = 0; i < 300; i++) {
		snprintf(p, sizeof p, i % 3 ? "f%d" : "d/f%d", i);
		REQUIRE(close(open(p, O_CREAT | O_WRONLY, 0644)) == 0, "create %s", p);
		if (i % 7 == 0)
			acls += setxattr(p, "system.posix_acl_access", acl, sizeof acl, 0) == 0;
		if (i % 11 == 0)
			sels += setxattr(p, SEL, "x", 1, 0) == 0;
		if (i % 13 == 0)
			CHECK(setxattr(p, "user.k", "v", 1, 0) == 0, "setxattr user.k %s", p);
		if (i % 17 == 0) {
			char l[64];
			snprintf(l, sizeof l, "l%d", i);
			unlink(l);
			CHECK(symlink(p, l) == 0, "symlink %s", l);
		}
	}
	printf("acl %s, selinux %s\n", acls ? "yes" : "no", sels ? "yes" : "no");
	return bad;
}

int main(int argc, char **argv)
{
	REQUIRE(argc == 2 || (argc == 3 && !strcmp(argv[2], "make")), "usage: xattrahead DIR [make]");
	REQUIRE(mkdir(argv[1], 0755) == 0 || errno == EEXIST, "mkdir %s", argv[1]);
	REQUIRE(chdir(argv[1]) == 0, "chdir %s", argv[1]);
	if (argc == 3)
		return make();
	char p[32];
	for (int i = 0; i < NPLAIN; i++) {
		snprintf(p, sizeof p, "p%d", i);
		REQUIRE(close(open(p, O_CREAT | O_WRONLY, 0644)) == 0, "create %s", p);
	}
	const char *plain[] = {"s1", "s2", "c1"};
	for (int i = 0; i < 3; i++)
		REQUIRE(close(open(plain[i], O_CREAT | O_WRONLY | O_TRUNC, 0644)) == 0, "create %s", plain[i]);
	removexattr("s1", SEL), removexattr("s2", SEL);
	REQUIRE(close(open("t7", O_CREAT | O_WRONLY, 0644)) == 0, "create t7");
	if (setxattr("t7", SEL, "t", 1, 0) != 0) {
		printf("SKIP: setxattr %s: %s\n", SEL, errname(errno));
		return 0;
	}
	unlink("l7");
	REQUIRE(symlink("t7", "l7") == 0, "symlink l7");
	REQUIRE(mkdir("sub", 0755) == 0 || errno == EEXIST, "mkdir sub");
	REQUIRE(close(open("sub/c1", O_CREAT | O_WRONLY, 0644)) == 0, "create sub/c1");
	REQUIRE(setxattr("sub/c1", SEL, "sub", 3, 0) == 0, "setxattr sub/c1");
	edge = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(edge != MAP_FAILED && munmap(edge + 4096, 4096) == 0, "mmap");

	/* The get sites patched (the rewrite tier patches a site that has
	 * trapped 64 times), on a thread of its own. */
	pthread_t t;
	pthread_create(&t, NULL, run, "");
	pthread_join(t, NULL);
	pattern(0, 100);
	const char *cases[] = {"set", "other", "rewrite", "symlink", "chdir", "badpath", "badname", "value"};
	for (int i = 0; i < 8; i++) {
		int before = bad;
		bad = 0;
		pthread_create(&t, NULL, run, (void *)cases[i]);
		pthread_join(t, NULL);
		printf("%s: %s\n", cases[i], bad ? "FAILED" : "ok");
		bad |= before;
	}
	return bad;
}
