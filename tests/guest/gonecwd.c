/*
 * gonecwd DIR [fork]: a working directory removed while the process is in
 * it, by rmdir and by a rename of another directory over it. Linux keeps
 * the process in the dead directory: getcwd is ENOENT, /proc/self/cwd
 * reads "PATH (deleted)", no name is found in it (a create is ENOENT),
 * not even one a new directory at the same path holds, and ".." still
 * leads to its parent; a child forked there is there too ("fork"). One
 * line each, the same natively and under kbox, DIR's prefix left out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static const char *dir;

/* shown prints p with DIR's prefix left out. */
static void shown(const char *what, const char *how, const char *p)
{
	size_t n = strlen(dir);
	if (strncmp(p, dir, n) == 0 && (p[n] == '/' || p[n] == 0))
		printf("%s: %s DIR%s\n", what, how, p + n);
	else
		printf("%s: %s %s\n", what, how, p);
}

/* where prints getcwd's answer and /proc/self/cwd's text. */
static void where(const char *what)
{
	char buf[PATH_MAX];
	if (getcwd(buf, sizeof buf) == NULL)
		printf("%s: getcwd %s\n", what, errname(errno));
	else
		shown(what, "getcwd", buf);
	ssize_t n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
	if (n < 0) {
		printf("%s: cwd link %s\n", what, errname(errno));
		return;
	}
	buf[n] = 0;
	shown(what, "cwd link", buf);
}

static void put(const char *p)
{
	int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	char a[PATH_MAX], af[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
	struct stat st;

	if (argc < 2)
		return 2;
	dir = argv[1];
	mkdir(dir, 0755);
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(af, sizeof af, "%s/a/f", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	snprintf(c, sizeof c, "%s/c", dir);

	mkdir(a, 0755);
	printf("chdir a %s\n", outcome(chdir(a)));
	where("in a");
	printf("rmdir a %s\n", outcome(rmdir(a)));
	where("a removed");
	printf("create x %s\n", outcome(open("x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
	printf("mkdir y %s\n", outcome(mkdir("y", 0755)));
	mkdir(a, 0755);
	put(af);
	printf("f of a new a %s\n", outcome(open("f", O_RDONLY | O_CLOEXEC)));
	printf("stat ../a/f %s\n", outcome(stat("../a/f", &st)));
	if (argc > 2 && strcmp(argv[2], "fork") == 0) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			where("child");
			printf("child: f %s\n", outcome(open("f", O_RDONLY | O_CLOEXEC)));
			fflush(stdout);
			_exit(0);
		}
		waitpid(pid, NULL, 0);
	}
	printf("chdir .. %s\n", outcome(chdir("..")));
	where("up");

	mkdir(b, 0755);
	mkdir(c, 0755);
	printf("chdir c %s\n", outcome(chdir(c)));
	printf("rename b over c %s\n", outcome(rename(b, c)));
	where("c replaced");
	printf("create x %s\n", outcome(open("x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
	printf("chdir c again %s\n", outcome(chdir(c)));
	where("new c");
	printf("create x %s\n", outcome(open("x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
	return 0;
}
