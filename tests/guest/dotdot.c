/*
 * dotdot: ".." and a trailing slash after links, as Linux takes them.
 *
 * dotdot DIR makes DIR (if need be) and DIR/t with directories a/b/c, a file f, links
 * l -> DIR/t/a/b/c (absolute), rl -> a/b (relative) and loop -> loop,
 * then prints, for each path below, which of the known directories it
 * names ("a/b", "proc/PID", ...) or the errno of its stat. ".." goes up
 * from the directory a path has reached, its links followed
 * ("l/.." is a/b, not DIR/t), through a name that must be a searchable
 * directory ("f/.." is ENOTDIR, "nx/.." ENOENT); a trailing slash
 * follows a link first (/dev/fd/ is /proc/self/fd, /dev/fd/0/ of a
 * pipe ENOTDIR). Then: /dev/fd/N names only the fds /proc/self/fd
 * lists (in kbox's in-process tiers the guest is kbox's process, whose
 * own fds are none of the guest's), and a run may open /dev/stdin any
 * number of times; a rename from or to "." or ".." is EBUSY. The same
 * lines natively and under kbox, and a last few as nobody: ".." leaves
 * only a directory the caller may search (EACCES).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

static const char *base;
static char t[1024];

struct known {
	char path[PATH_MAX];
	const char *label;
	struct stat st;
};

static struct known known[] = {
	{"", "t"}, {"", "a"}, {"", "a/b"}, {"", "a/b/c"}, {"/", "/"},
	{"/proc", "/proc"}, {"/proc/self/", "proc/PID"}, {"/proc/self/fd/", "proc/PID/fd"},
	{"/proc/thread-self/", "proc/PID/task/TID"}, {"/proc/self/task", "proc/PID/task"},
};

/* Prints which known directory st is. */
static void label(const char *what, const struct stat *st)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (known[i].st.st_dev == st->st_dev && known[i].st.st_ino == st->st_ino) {
			printf("%s: %s\n", what, known[i].label);
			return;
		}
	}
	printf("%s: another %s\n", what, S_ISDIR(st->st_mode) ? "directory" : "file");
}

/* Stats p (relative to t unless absolute) at dirfd and prints what it is. */
static void at(const char *what, int dirfd, const char *p, int flags)
{
	struct stat st;

	if (fstatat(dirfd, p, &st, flags) != 0) {
		printf("%s: %s\n", what, errname(errno));
		return;
	}
	label(what, &st);
}

static void show(const char *p)
{
	at(p, AT_FDCWD, p, 0);
}

int main(int argc, char **argv)
{
	char p[PATH_MAX + 64], q[PATH_MAX + 64];
	const char *rel[] = {"l/..", "rl/..", "l/../..", "f/.", "f/..", "nx/..", "l/../c/../../b/./c",
			     "rl/../b/c/../..", "loop/..", "a/b/c/../../../l/../../b/", "f/../a", "l/..//..//.", NULL};
	const char *abs[] = {"/proc/self/..", "/proc/self/fd/..", "/proc/self/fd/0/..", "/proc/net/..",
			     "/proc/thread-self/..", "/proc/..", "/proc/self/task/..", "/dev/fd/", "/dev/fd/.",
			     "/dev/fd/..", "/dev/fd/0/", "/dev/stdin/", "/dev/fd/99/", "/dev/fd/99/..", NULL};
	int fd, pfd[2];

	if (argc < 2) {
		fprintf(stderr, "usage: dotdot DIR\n");
		return 2;
	}
	base = argv[1];
	REQUIRE(strlen(base) < 512, "a shorter DIR");
	snprintf(t, sizeof(t), "%s/t", base);
	mkdir(base, 0755); /* there already, natively */
	snprintf(known[0].path, PATH_MAX, "%s", t);
	snprintf(known[1].path, PATH_MAX, "%s/a", t);
	snprintf(known[2].path, PATH_MAX, "%s/a/b", t);
	snprintf(known[3].path, PATH_MAX, "%s/a/b/c", t);
	snprintf(p, sizeof(p), "%s/a/b/c", t);
	REQUIRE(mkdir(t, 0755) == 0, "mkdir %s", t);
	REQUIRE(mkdir(known[1].path, 0755) == 0 && mkdir(known[2].path, 0755) == 0 && mkdir(p, 0755) == 0, "mkdir");
	REQUIRE(chdir(t) == 0, "chdir %s", t);
	REQUIRE(symlink(p, "l") == 0 && symlink("a/b", "rl") == 0 && symlink("loop", "loop") == 0, "symlink");
	REQUIRE((fd = open("f", O_CREAT | O_WRONLY, 0644)) >= 0 && close(fd) == 0, "create f");
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		REQUIRE(stat(known[i].path, &known[i].st) == 0, "stat %s", known[i].path);

	for (int i = 0; rel[i]; i++)
		show(rel[i]);
	for (int i = 0; abs[i]; i++)
		show(abs[i]);

	/* The guest's root: /proc/self/root, then ".." stays at "/". */
	snprintf(q, sizeof(q), "/proc/self/root/../..%s/a", t);
	at("/proc/self/root/../../T/a", AT_FDCWD, q, 0);

	/* A working directory entered through a link is the target: ".."
	 * from it, and /proc/self/cwd/.. */
	REQUIRE(chdir("l") == 0, "chdir l");
	at("cwd l: ..", AT_FDCWD, "..", 0);
	at("cwd l: ../..", AT_FDCWD, "../..", 0);
	at("cwd l: /proc/self/cwd/..", AT_FDCWD, "/proc/self/cwd/..", 0);
	REQUIRE(chdir(t) == 0, "chdir back");

	/* A directory fd opened through a link, and the fd's own paths. */
	REQUIRE((fd = open("l", O_RDONLY | O_DIRECTORY)) >= 0, "open l");
	at("fd of l: ..", fd, "..", 0);
	at("fd of l: ../../b", fd, "../../b", 0);
	snprintf(q, sizeof(q), "/dev/fd/%d/", fd);
	at("/dev/fd/L/", AT_FDCWD, q, 0);
	at("/dev/fd/L/ nofollow", AT_FDCWD, q, AT_SYMLINK_NOFOLLOW);
	snprintf(q, sizeof(q), "/dev/fd/%d/..", fd);
	at("/dev/fd/L/..", AT_FDCWD, q, 0);
	snprintf(q, sizeof(q), "/proc/self/fd/%d/..", fd);
	at("/proc/self/fd/L/..", AT_FDCWD, q, 0);
	close(fd);

	/* A trailing slash after the link of a pipe. */
	REQUIRE(pipe(pfd) == 0, "pipe");
	snprintf(q, sizeof(q), "/dev/fd/%d/", pfd[0]);
	at("/dev/fd/PIPE/", AT_FDCWD, q, 0);
	at("/dev/fd/ nofollow", AT_FDCWD, "/dev/fd/", AT_SYMLINK_NOFOLLOW);

	/* Made through "..": the file lands where Linux puts it. */
	REQUIRE((fd = open("l/../made", O_CREAT | O_WRONLY, 0644)) >= 0, "create l/../made");
	close(fd);
	show("a/b/made");
	show("made");
	CHECK(mkdir("rl/../newdir", 0755) == 0, "mkdir rl/../newdir");
	show("a/newdir");
	CHECK(rename("l/../made", "rl/../moved") == 0, "rename");
	show("a/moved");
	CHECK(unlink("rl/../moved") == 0, "unlink rl/../moved");
	show("a/moved");

	/* A rename from or to a name "." or "..": EBUSY (EEXIST to one
	 * with RENAME_NOREPLACE), whatever the directories are. */
	const char *renames[][2] = {{"a/b/c", "."}, {"a/b/c", "a/.."}, {"a/b/.", "x"}, {"l/..", "x"}, {"a/newdir", "l/.."}};
	for (size_t i = 0; i < sizeof(renames) / sizeof(renames[0]); i++) {
		int rv = rename(renames[i][0], renames[i][1]);
		printf("rename %s %s: %s\n", renames[i][0], renames[i][1], rv == 0 ? "ok" : errname(errno));
	}
	int rv = (int)syscall(SYS_renameat2, AT_FDCWD, "a/b/c", AT_FDCWD, ".", 1 /* RENAME_NOREPLACE */);
	printf("renameat2 NOREPLACE a/b/c .: %s\n", rv == 0 ? "ok" : errname(errno));

	/* /dev/fd/N beyond what /proc/self/fd lists. */
	char listed[1024] = {0};
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	REQUIRE(d != NULL, "opendir /proc/self/fd");
	while ((de = readdir(d)) != NULL) {
		int n = atoi(de->d_name);
		if (n > 0 && n < 1024)
			listed[n] = 1;
	}
	int own = dirfd(d), beyond = 0;
	for (int n = 3; n < 1024; n++) {
		struct stat st;
		snprintf(q, sizeof(q), "/dev/fd/%d", n);
		if (n != own && !listed[n] && stat(q, &st) == 0) {
			if (beyond++ < 3)
				printf("/dev/fd/%d is there, /proc/self/fd does not list it\n", n);
		}
	}
	closedir(d);
	printf("fds beyond the listing: %d\n", beyond);

	/* Many opens of /dev/stdin in one run. */
	int failed = 0;
	for (int i = 0; i < 100; i++) {
		if ((fd = open("/dev/stdin", O_RDONLY)) < 0)
			failed++;
		else
			close(fd);
	}
	printf("100 opens of /dev/stdin: %d failed\n", failed);

	/* Last, as nobody (run as root: the ids cannot come back): ".."
	 * leaves a directory only one may search. */
	REQUIRE(mkdir("perm", 0700) == 0 && mkdir("perm/sub", 0755) == 0, "mkdir perm/sub");
	REQUIRE(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0, "become nobody");
	at("nobody: perm/sub/..", AT_FDCWD, "perm/sub/..", 0);
	at("nobody: perm/..", AT_FDCWD, "perm/..", 0);
	at("nobody: rl/..", AT_FDCWD, "rl/..", 0);
	return bad;
}
