/*
 * linkfd DIR: names for open files, made in DIR: linkat of
 * /proc/self/fd/N and /dev/fd/N with AT_SYMLINK_FOLLOW (open(2)'s way of
 * naming an O_TMPFILE file) and linkat(fd, "", AT_EMPTY_PATH), for an
 * O_TMPFILE file, one made O_EXCL (never linkable: ENOENT) and a file
 * with a name already. Writes after the link show through every name;
 * a name that exists is EEXIST, a bad fd EBADF. linkfd -c DIR: a child
 * names its parent's O_TMPFILE file through /proc/PPID/fd/N, and the
 * parent reads it by that name. linkfd -i DIR: names stdin's file in DIR
 * (kbox refuses a host file outside the binds a name in one). Prints one
 * line per step, the same natively (as root) and under kbox.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static void step(const char *what, int r)
{
	printf("%s: %s\n", what, r == 0 ? "ok" : errname(errno));
}

static void show(const char *name)
{
	char buf[32] = {0};
	struct stat st;
	int fd = open(name, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) != 0) {
		printf("%s: %s\n", name, errname(errno));
		return;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	printf("%s: %zd bytes \"%s\", %ld links, mode %o\n", name, n, n > 0 ? buf : "", (long)st.st_nlink,
	       (unsigned)(st.st_mode & 07777));
	close(fd);
}

int main(int argc, char **argv)
{
	char p[64];

	if (argc == 3 && strcmp(argv[1], "-c") == 0) {
		REQUIRE(chdir(argv[2]) == 0, "chdir");
		int tmp = open(".", O_TMPFILE | O_RDWR, 0600);
		REQUIRE(tmp >= 0 && write(tmp, "parent's", 8) == 8, "O_TMPFILE");
		snprintf(p, sizeof(p), "/proc/%d/fd/%d", (int)getpid(), tmp);
		pid_t pid = fork();
		if (pid == 0)
			_exit(linkat(AT_FDCWD, p, AT_FDCWD, "bychild", AT_SYMLINK_FOLLOW) == 0 ? 0 : errno);
		int status;
		REQUIRE(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status), "the child");
		printf("a child links its parent's file: %s\n",
		       WEXITSTATUS(status) == 0 ? "ok" : errname(WEXITSTATUS(status)));
		show("bychild");
		return bad;
	}
	if (argc == 3 && strcmp(argv[1], "-i") == 0) {
		REQUIRE(chdir(argv[2]) == 0, "chdir");
		step("link stdin by /proc/self/fd/0", linkat(AT_FDCWD, "/proc/self/fd/0", AT_FDCWD, "in1", AT_SYMLINK_FOLLOW));
		step("link stdin by /dev/fd/0", linkat(AT_FDCWD, "/dev/fd/0", AT_FDCWD, "in2", AT_SYMLINK_FOLLOW));
		step("link stdin AT_EMPTY_PATH", linkat(0, "", AT_FDCWD, "in3", AT_EMPTY_PATH));
		return bad;
	}
	REQUIRE(argc == 2 && chdir(argv[1]) == 0, "usage: linkfd [-c|-i] DIR");
	int tmp = open(".", O_TMPFILE | O_RDWR, 0640);
	REQUIRE(tmp >= 0, "O_TMPFILE");
	REQUIRE(write(tmp, "tmp", 3) == 3, "write");
	snprintf(p, sizeof(p), "/proc/self/fd/%d", tmp);
	step("link /proc/self/fd/N", linkat(AT_FDCWD, p, AT_FDCWD, "byproc", AT_SYMLINK_FOLLOW));
	snprintf(p, sizeof(p), "/dev/fd/%d", tmp);
	step("link /dev/fd/N", linkat(AT_FDCWD, p, AT_FDCWD, "bydev", AT_SYMLINK_FOLLOW));
	step("link fd AT_EMPTY_PATH", linkat(tmp, "", AT_FDCWD, "byfd", AT_EMPTY_PATH));
	step("link onto a name there", linkat(tmp, "", AT_FDCWD, "byproc", AT_EMPTY_PATH));
	REQUIRE(write(tmp, "+more", 5) == 5, "write after the links");
	show("byproc");
	show("bydev");
	show("byfd");

	int excl = open(".", O_TMPFILE | O_RDWR | O_EXCL, 0600);
	REQUIRE(excl >= 0, "O_TMPFILE|O_EXCL");
	snprintf(p, sizeof(p), "/proc/self/fd/%d", excl);
	step("link an O_EXCL temporary file", linkat(AT_FDCWD, p, AT_FDCWD, "excl", AT_SYMLINK_FOLLOW));

	int reg = open("reg", O_CREAT | O_RDWR, 0644);
	REQUIRE(reg >= 0 && write(reg, "reg", 3) == 3, "reg");
	snprintf(p, sizeof(p), "/proc/self/fd/%d", reg);
	step("link a named file's fd", linkat(AT_FDCWD, p, AT_FDCWD, "reg2", AT_SYMLINK_FOLLOW));
	show("reg2");
	step("link a bad fd", linkat(999, "", AT_FDCWD, "bad", AT_EMPTY_PATH));
	step("link the cwd", linkat(AT_FDCWD, "", AT_FDCWD, "cwd", AT_EMPTY_PATH));
	step("link without a flag: the link itself", linkat(AT_FDCWD, p, AT_FDCWD, "nofollow", 0));
	return bad;
}
