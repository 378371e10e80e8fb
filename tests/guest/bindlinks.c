/* Symlinks in a bind whose targets leave it, checked against what Linux
 * does with a bind mount: an absolute target is resolved from the
 * process's root, and ".." above the bind goes on in the tree the bind
 * is mounted in. Every check compares with the target's own path (same
 * device and inode, same content), so the program checks itself natively
 * (a bind mount) as in kbox.
 *
 * usage: bindlinks BIND SCRATCH HOSTONLY
 *   BIND     the bind's path, writable, empty
 *   SCRATCH  a writable directory outside the bind (the image's /tmp)
 *   HOSTONLY an absolute path that exists on the host but not in the
 *            guest's tree: a link to it must find nothing
 * Prints "ok NAME" or "FAIL NAME: why" per check; exits 1 on a failure. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static int failed;

static void check(int good, const char *name, const char *why)
{
	if (good) {
		printf("ok %s\n", name);
	} else {
		printf("FAIL %s: %s (errno %s)\n", name, why, strerror(errno));
		failed = 1;
	}
}

static char *cat(const char *a, const char *b)
{
	char *s;
	if (asprintf(&s, "%s%s", a, b) < 0)
		exit(2);
	return s;
}

/* same: stat(a) and stat(b) both succeed and name one inode. */
static int same(const char *a, const char *b)
{
	struct stat sa, sb;
	if (stat(a, &sa) || stat(b, &sb))
		return 0;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int fails(int r, int en) { return r < 0 && errno == en; }

static void mklink(const char *target, const char *at)
{
	if (symlink(target, at)) {
		printf("FAIL set-up: symlink %s -> %s: %s\n", at, target, strerror(errno));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bindlinks BIND SCRATCH HOSTONLY\n");
		return 2;
	}
	const char *b = argv[1], *tmp = argv[2], *hostonly = argv[3];
	char up[512] = "";
	for (const char *p = b; *p; p++) /* "../" for each component of b */
		if (*p == '/')
			strcat(up, "../");
	struct stat st;
	char buf[256];

	int fd = open(cat(b, "/f"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	check(fd >= 0 && write(fd, "bind-file\n", 10) == 10 && close(fd) == 0, "a file in the bind", "create");
	fd = open(cat(tmp, "/t"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	check(fd >= 0 && write(fd, "tmp-file\n", 9) == 9 && close(fd) == 0, "a file outside it", "create");

	mklink("/etc/hostname", cat(b, "/abs"));
	mklink("/etc", cat(b, "/absdir"));
	mklink(tmp, cat(b, "/tmpdir"));
	mklink(cat(up, "etc/hostname"), cat(b, "/up"));
	mklink("../../../../../../../../../../../etc/hostname", cat(b, "/deep"));
	mklink(cat(b, "/f"), cat(b, "/self"));
	mklink(cat(tmp, "/made-through-link"), cat(b, "/dangling"));
	mklink(cat(b, "/loop"), cat(b, "/loop"));
	mklink(hostonly, cat(b, "/hostonly"));

	check(same(cat(b, "/abs"), "/etc/hostname"), "stat of an absolute link is its target's", "differs");
	check(lstat(cat(b, "/abs"), &st) == 0 && S_ISLNK(st.st_mode), "lstat of it is the link", "not a link");
	ssize_t n = readlink(cat(b, "/abs"), buf, sizeof buf);
	check(n == 13 && memcmp(buf, "/etc/hostname", 13) == 0, "readlink gives the target as written", "other");
	check(access(cat(b, "/abs"), R_OK) == 0, "access through it", "refused");
	char want[256] = "", got[256] = "";
	fd = open("/etc/hostname", O_RDONLY);
	if (fd >= 0) {
		if (read(fd, want, sizeof want - 1) < 0)
			want[0] = 0;
		close(fd);
	}
	fd = open(cat(b, "/abs"), O_RDONLY);
	check(fd >= 0 && read(fd, got, sizeof got - 1) > 0 && strcmp(got, want) == 0, "open and read through it", "other content");
	if (fd >= 0)
		close(fd);
	check(fails(open(cat(b, "/abs"), O_RDONLY | O_NOFOLLOW), ELOOP), "O_NOFOLLOW on it is ELOOP", "other");

	check(same(cat(b, "/absdir/hostname"), "/etc/hostname"), "a link to a directory, mid-path", "differs");
	DIR *d = opendir(cat(b, "/absdir"));
	int seen = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		seen |= strcmp(de->d_name, "hostname") == 0;
	check(d && seen, "listing through it is the target's", "hostname not listed");
	if (d)
		closedir(d);
	int dfd = open(b, O_RDONLY | O_DIRECTORY);
	check(dfd >= 0 && fstatat(dfd, "absdir/hostname", &st, 0) == 0, "fstatat from a bind directory fd", "failed");
	check(dfd >= 0 && faccessat(dfd, "abs", R_OK, 0) == 0, "faccessat from it", "failed");
	check(same(cat(b, "/absdir/../etc/hostname"), "/etc/hostname"), "\"..\" after the link is the target's parent", "differs");

	check(same(cat(b, "/up"), "/etc/hostname"), "\"..\" above the bind goes on in the guest's tree", "differs");
	check(same(cat(b, "/deep"), "/etc/hostname"), "\"..\" at the root stays there", "differs");
	check(same(cat(b, "/self"), cat(b, "/f")), "an absolute link into the bind itself", "differs");

	check(fails(stat(cat(b, "/dangling"), &st), ENOENT), "a dangling link is ENOENT", "other");
	check(fails(open(cat(b, "/dangling"), O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST), "O_CREAT|O_EXCL on it is EEXIST", "other");
	fd = open(cat(b, "/dangling"), O_CREAT | O_WRONLY, 0600);
	check(fd >= 0, "O_CREAT through it creates the target", "failed");
	if (fd >= 0)
		close(fd);
	check(stat(cat(tmp, "/made-through-link"), &st) == 0 && (st.st_mode & 0777) == 0600, "the target is where the link says", "not there");
	check(fails(lstat(cat(b, "/made-through-link"), &st), ENOENT), "and not in the bind", "in the bind");

	check(mkdir(cat(b, "/tmpdir/newdir"), 0700) == 0 && stat(cat(tmp, "/newdir"), &st) == 0 && S_ISDIR(st.st_mode),
	      "mkdir through a link to a directory", "not made there");
	check(rename(cat(b, "/tmpdir/newdir"), cat(b, "/tmpdir/newdir2")) == 0 && stat(cat(tmp, "/newdir2"), &st) == 0,
	      "rename within the target's directory", "failed");
	struct stat sb, stt;
	int r = rename(cat(b, "/tmpdir/t"), cat(b, "/t2"));
	if (stat(b, &sb) == 0 && stat(tmp, &stt) == 0 && sb.st_dev != stt.st_dev)
		check(fails(r, EXDEV), "rename from there into the bind is EXDEV", "other");
	else /* natively, two directories of one filesystem */
		check(r == 0 && rename(cat(b, "/t2"), cat(b, "/tmpdir/t")) == 0, "rename from there into the bind's directory", "failed");
	check(link(cat(b, "/tmpdir/t"), cat(b, "/tmpdir/t-hard")) == 0 && same(cat(tmp, "/t-hard"), cat(tmp, "/t")),
	      "link within the target's directory", "failed");
	check(chmod(cat(b, "/tmpdir/t"), 0640) == 0 && stat(cat(tmp, "/t"), &st) == 0 && (st.st_mode & 0777) == 0640,
	      "chmod through it", "mode not set");
	struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
	check(utimes(cat(b, "/tmpdir/t"), tv) == 0 && stat(cat(tmp, "/t"), &st) == 0 && st.st_mtime == 1000000000,
	      "utimes through it", "time not set");
	check(truncate(cat(b, "/tmpdir/t"), 3) == 0 && stat(cat(tmp, "/t"), &st) == 0 && st.st_size == 3,
	      "truncate through it", "size not set");
	check(unlink(cat(b, "/tmpdir/t-hard")) == 0 && fails(lstat(cat(tmp, "/t-hard"), &st), ENOENT),
	      "unlink through it", "still there");
	check(rmdir(cat(b, "/tmpdir/newdir2")) == 0 && fails(lstat(cat(tmp, "/newdir2"), &st), ENOENT),
	      "rmdir through it", "still there");

	check(chdir(cat(b, "/absdir")) == 0 && getcwd(buf, sizeof buf) && strcmp(buf, "/etc") == 0,
	      "chdir through it: the cwd is the target", buf);
	check(stat("hostname", &st) == 0, "and a relative path from there", "failed");
	check(chdir(b) == 0, "back", "failed");

	check(fails(stat(cat(b, "/loop"), &st), ELOOP), "a link to itself is ELOOP", "other");
	check(fails(stat(cat(b, "/hostonly"), &st), ENOENT) && fails(open(cat(b, "/hostonly"), O_RDONLY), ENOENT),
	      "a link to a host path outside the guest's tree finds nothing", "found something");
	return failed;
}
