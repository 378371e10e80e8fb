/* procfd DIR: a process's own fds seen through /proc/self/fd, as Linux
 * shows them. DIR is a writable directory; paths are printed with DIR as
 * "DIR", so that a native run and a run under kbox print the same lines
 * (under kbox the directory fd is a virtual fd, >= 1024, and the file a
 * shadow).
 *
 * It lists /proc/self/fd and finds its fds there, reads their links (a
 * file, a directory, a pipe), stats through them, reopens a file (a new
 * description: its own offset), a directory and a pipe's write end
 * through them, opens a path through a directory's link, follows a file
 * renamed and then removed while open, and reads fdinfo. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;
static int failed;

/* show prints a link's text with dir replaced by "DIR". */
static void show(const char *what, const char *text)
{
	size_t n = strlen(dir);
	if (strncmp(text, dir, n) == 0)
		printf("%s -> DIR%s\n", what, text + n);
	else if (strncmp(text, "pipe:[", 6) == 0)
		printf("%s -> pipe:[N]\n", what);
	else
		printf("%s -> %s\n", what, text);
}

static void link_of(const char *what, int fd)
{
	char p[64], buf[4096];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, buf, sizeof(buf) - 1);
	if (n < 0) {
		printf("%s: readlink: %s\n", what, strerror(errno));
		failed = 1;
		return;
	}
	buf[n] = 0;
	show(what, buf);
}

static void check(const char *what, int ok)
{
	printf("%s: %s\n", what, ok ? "ok" : "FAIL");
	if (!ok)
		failed = 1;
}

static int listed(int fd)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = 0, self = d ? dirfd(d) : -1;
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (atoi(e->d_name) == fd && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			found = 1;
	/* As on Linux, the listing shows the fd it is read through. */
	rewinddir(d);
	int seen_self = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) == self)
			seen_self = 1;
	closedir(d);
	return found && seen_self;
}

int main(int argc, char **argv)
{
	char a[4096], b[4096], p[4096], buf[64];
	struct stat st, st2;
	int fd, dfd, pfd[2], fd2, d2, w2, pd;

	if (argc != 2) {
		fprintf(stderr, "usage: procfd DIR\n");
		return 2;
	}
	dir = argv[1];
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	fd = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || dfd < 0 || pipe(pfd) < 0 || write(fd, "hello\n", 6) != 6) {
		perror("setup");
		return 1;
	}

	fprintf(stderr, "directory fd %d\n", dfd); /* under kbox a virtual fd */
	struct stat fst;
	check("test -d /proc/self/fd", stat("/proc/self/fd", &fst) == 0 && S_ISDIR(fst.st_mode));
	check("listed file, directory and pipe", listed(fd) && listed(dfd) && listed(pfd[0]) && listed(pfd[1]));
	link_of("file", fd);
	link_of("directory", dfd);
	link_of("pipe", pfd[0]);

	snprintf(p, sizeof(p), "/proc/self/fd/%d", dfd);
	check("lstat of a link is a link", lstat(p, &st) == 0 && S_ISLNK(st.st_mode));
	check("stat through a directory's link", stat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
						     fstat(dfd, &st2) == 0 && st.st_ino == st2.st_ino);
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	check("stat through a file's link", stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 6);

	/* A reopen is a new description: its own offset. */
	fd2 = open(p, O_RDONLY);
	memset(buf, 0, sizeof(buf));
	check("reopen a file and read it", fd2 >= 0 && read(fd2, buf, sizeof(buf)) == 6 && strcmp(buf, "hello\n") == 0);
	check("the reopened file has its own offset", lseek(fd, 0, SEEK_CUR) == 6 && lseek(fd2, 0, SEEK_CUR) == 6 &&
							       lseek(fd2, 0, SEEK_SET) == 0 && lseek(fd, 0, SEEK_CUR) == 6);
	check("a reopen for writing writes the same file", (w2 = open(p, O_WRONLY | O_APPEND)) >= 0 &&
								   write(w2, "more\n", 5) == 5 && fstat(fd, &st) == 0 &&
								   st.st_size == 11);
	close(w2);

	snprintf(p, sizeof(p), "/proc/self/fd/%d", dfd);
	d2 = open(p, O_RDONLY | O_DIRECTORY);
	check("reopen a directory", d2 >= 0 && fstat(d2, &st) == 0 && fstat(dfd, &st2) == 0 && st.st_ino == st2.st_ino);
	close(d2);
	snprintf(p, sizeof(p), "/proc/self/fd/%d/a", dfd);
	fd2 = open(p, O_RDONLY);
	memset(buf, 0, sizeof(buf));
	check("a path through a directory's link", fd2 >= 0 && read(fd2, buf, 6) == 6 && strcmp(buf, "hello\n") == 0);
	close(fd2);

	/* openat relative to a directory fd of /proc/self/fd. */
	pd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
	snprintf(p, sizeof(p), "%d", fd);
	fd2 = openat(pd, p, O_RDONLY);
	check("openat from /proc/self/fd", pd >= 0 && fd2 >= 0 && fstat(fd2, &st) == 0 && st.st_size == 11);
	close(fd2);
	close(pd);

	snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd[1]);
	w2 = open(p, O_WRONLY);
	memset(buf, 0, sizeof(buf));
	check("reopen a pipe's write end", w2 >= 0 && write(w2, "x", 1) == 1 && read(pfd[0], buf, 1) == 1 && buf[0] == 'x');
	close(w2);

	if (rename(a, b) < 0) {
		perror("rename");
		return 1;
	}
	link_of("renamed", fd);
	if (unlink(b) < 0) {
		perror("unlink");
		return 1;
	}
	link_of("removed", fd);

	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", dfd);
	FILE *f = fopen(p, "r");
	int pos = 0, flags = 0;
	char line[256];
	while (f && fgets(line, sizeof(line), f)) {
		pos |= strncmp(line, "pos:", 4) == 0;
		flags |= strncmp(line, "flags:", 6) == 0;
	}
	if (f)
		fclose(f);
	check("fdinfo of the directory", pos && flags);
	return failed;
}
