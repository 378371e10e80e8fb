/*
 * chroot(2) and what a process's root changes, one line per check ("what
 * result"). Run as root in an empty working directory; "chrootp SELF"
 * (SELF: this program's path, copied into the new root) prints what a
 * native run prints.
 *
 * The errnos of chroot (ENOENT, ENOTDIR, ELOOP, EFAULT, ENAMETOOLONG;
 * EACCES for a directory or component the euid may not search, then
 * EPERM without CAP_SYS_CHROOT); then a child chroots into jail/: its
 * cwd, left outside, is "(unreachable)"; absolute paths, absolute and
 * relative symlinks (final or not) and ".." chains stay inside the new
 * root; O_CREAT through a dangling absolute link creates inside it; a
 * forked child inherits the root, an exec'd program keeps it (and a
 * dynamic one finds its PT_INTERP loader and libc inside it, a #! script
 * its interpreter, which opens the script inside it); fchdir to
 * an fd opened before the chroot leaves it, as Linux lets it. The parent
 * reads the child's /proc/PID/root.
 *
 * "chrootp hostile MARKER" (under kbox only) chroots, climbs with "..",
 * escapes through an fd opened before the chroot, chroots again to "."
 * and climbs further: it must reach the image's root and never MARKER, a
 * host file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

/* readf prints the first line of file p, or its errno. */
static void readf(const char *what, const char *p)
{
	char b[64] = "";
	int fd = open(p, O_RDONLY);
	if (fd < 0) {
		printf("%s %s\n", what, outcome(-1));
		return;
	}
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	b[n > 0 ? n : 0] = 0;
	b[strcspn(b, "\n")] = 0;
	printf("%s %s\n", what, b);
}

static void writef(const char *p, const char *s)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (fd < 0 || write(fd, s, strlen(s)) < 0) {
		printf("setup %s %s\n", p, outcome(-1));
		exit(1);
	}
	close(fd);
}

/* copy copies file from to to (mode 0755); 0 when it could not. */
static int copy(const char *from, const char *to)
{
	char b[65536];
	int in = open(from, O_RDONLY), out;
	if (in < 0)
		return 0;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (out < 0) {
		close(in);
		return 0;
	}
	for (ssize_t n; (n = read(in, b, sizeof b)) > 0;)
		if (write(out, b, n) != n)
			return 0;
	close(in);
	close(out);
	return 1;
}

static void cwd(const char *what)
{
	char b[4096];
	if (!getcwd(b, sizeof b) && syscall(SYS_getcwd, b, sizeof b) < 0) {
		printf("%s %s\n", what, outcome(-1));
		return;
	}
	if (!strncmp(b, "(unreachable)", 13))
		strcpy(b, "(unreachable)");
	printf("%s %s\n", what, b);
}

static int waitchild(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void errnos(void)
{
	static char longname[4200];
	memset(longname, 'a', sizeof longname - 1);
	printf("chroot missing %s\n", outcome(chroot("missing")));
	printf("chroot file %s\n", outcome(chroot("outside")));
	printf("chroot file/ %s\n", outcome(chroot("outside/")));
	printf("chroot loop %s\n", outcome(chroot("loop1")));
	printf("chroot efault %s\n", outcome(syscall(SYS_chroot, (char *)1)));
	printf("chroot long %s\n", outcome(chroot(longname)));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (seteuid(65534) < 0)
			_exit(2);
		printf("nobody chroot nosearch %s\n", outcome(chroot("noexec")));
		printf("nobody chroot nosearch component %s\n", outcome(chroot("noexec/x")));
		printf("nobody chroot nocap %s\n", outcome(chroot("jail")));
		fflush(stdout);
		_exit(0);
	}
	printf("nobody status %d\n", waitchild(pid));
}

/* jailed runs in a child after chroot("jail"). */
static void jailed(int outfd)
{
	struct stat st;
	char b[256];
	cwd("getcwd outside root");
	readf("read /inside", "/inside");
	printf("stat /outside %s\n", outcome(stat("/outside", &st)));
	readf("read /abs (absolute link)", "/abs");
	printf("lstat /abs %s\n", lstat("/abs", &st) == 0 && S_ISLNK(st.st_mode) ? "link" : outcome(-1));
	ssize_t n = readlink("/abs", b, sizeof b - 1);
	b[n > 0 ? n : 0] = 0;
	printf("readlink /abs %s\n", n > 0 ? b : outcome(-1));
	printf("chdir /d %s\n", outcome(chdir("/d")));
	cwd("getcwd");
	readf("read up (relative link above root)", "up");
	readf("read /dlink/up (absolute link inside)", "/dlink/up");
	readf("read ../../../../inside", "../../../../inside");
	printf("chdir ../../.. %s\n", outcome(chdir("../../..")));
	cwd("getcwd");
	printf("stat /esc (../outside) %s\n", outcome(stat("/esc", &st)));
	printf("stat /../../outside %s\n", outcome(stat("/../../outside", &st)));
	printf("chdir /dlink %s\n", outcome(chdir("/dlink")));
	cwd("getcwd after chdir /dlink");
	chdir("/");
	printf("mkdir /newdir/ %s\n", outcome(mkdir("/newdir/", 0755)));
	printf("stat /newdir/. %s\n", outcome(stat("/newdir/.", &st)));
	printf("stat /dlink/ %s\n", stat("/dlink/", &st) == 0 && S_ISDIR(st.st_mode) ? "dir" : outcome(-1));
	printf("stat /inside/ %s\n", outcome(stat("/inside/", &st)));
	int fd = open("/dangling", O_WRONLY | O_CREAT, 0644);
	printf("creat through /dangling %s\n", outcome(fd));
	if (fd >= 0)
		close(fd);
	printf("stat /created %s\n", outcome(stat("/created", &st)));
	printf("creat excl /dangling %s\n", outcome(open("/dangling", O_WRONLY | O_CREAT | O_EXCL, 0644)));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		readf("fork: read /inside", "/inside");
		fflush(stdout);
		_exit(0);
	}
	waitchild(pid);
	pid = fork();
	if (pid == 0) {
		execl("/bin/chrootp", "chrootp", "inside", (char *)0);
		printf("exec /bin/chrootp %s\n", outcome(-1));
		_exit(1);
	}
	printf("exec status %d\n", waitchild(pid));
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execl("/bin/script", "script", (char *)0);
		printf("exec /bin/script %s\n", outcome(-1));
		_exit(1);
	}
	printf("exec script status %d\n", waitchild(pid));
	if (access("/bin/true", X_OK) == 0) {
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			execl("/bin/true", "true", (char *)0);
			printf("exec dynamic /bin/true %s\n", outcome(-1));
			fflush(stdout);
			_exit(127);
		}
		printf("exec dynamic /bin/true status %d\n", waitchild(pid));
	}
	printf("fchdir outside %s\n", outcome(fchdir(outfd)));
	cwd("getcwd escaped");
	readf("read outside (escaped)", "outside");
	readf("read /inside (still rooted)", "/inside");
	fflush(stdout);
}

/* hostile: chroot, climb, escape and chroot again, under kbox. */
static int hostile(const char *marker)
{
	struct stat st;
	mkdir("jail", 0755);
	int outfd = open(".", O_RDONLY | O_DIRECTORY);
	if (chroot("jail") < 0) {
		printf("hostile chroot %s\n", outcome(-1));
		return 1;
	}
	for (int i = 0; i < 64; i++)
		chdir("..");
	printf("hostile climbed, marker %s\n", outcome(stat(marker, &st)));
	printf("hostile fchdir %s\n", outcome(fchdir(outfd)));
	for (int i = 0; i < 64; i++)
		chdir("..");
	printf("hostile chroot . %s\n", outcome(chroot(".")));
	printf("hostile symlink %s\n", outcome(symlink("/../../../../..", "/up")));
	printf("hostile chdir /up/.. %s\n", outcome(chdir("/up/..")));
	printf("hostile chroot . again %s\n", outcome(chroot(".")));
	cwd("hostile getcwd");
	printf("hostile image root /opt/tests/chrootp %s\n", outcome(stat("/opt/tests/chrootp", &st)));
	printf("hostile marker %s\n", outcome(stat(marker, &st)));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "inside")) {
		cwd("exec: getcwd");
		readf("exec: read /inside", "/inside");
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "script")) {
		readf("script: reads itself", argv[2]);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "hostile"))
		return hostile(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: chrootp SELF | chrootp hostile MARKER\n");
		return 2;
	}
	chmod(".", 0755);
	mkdir("jail", 0755);
	mkdir("jail/d", 0755);
	mkdir("jail/bin", 0755);
	mkdir("noexec", 0700);
	writef("jail/inside", "in\n");
	writef("outside", "out\n");
	symlink("/inside", "jail/abs");
	symlink("../../../../../inside", "jail/d/up");
	symlink("/d", "jail/dlink");
	symlink("../outside", "jail/esc");
	symlink("/created", "jail/dangling");
	writef("jail/bin/script", "#!/bin/chrootp script\n");
	symlink("loop2", "loop1");
	symlink("loop1", "loop2");
	if (!copy(argv[1], "jail/bin/chrootp")) {
		printf("setup copy %s\n", outcome(-1));
		return 1;
	}
#if defined(__x86_64__)
	/* A dynamic program with its loader and libc, where it looks. */
	mkdir("jail/lib64", 0755);
	mkdir("jail/lib", 0755);
	mkdir("jail/lib/x86_64-linux-gnu", 0755);
	if (!copy("/lib64/ld-linux-x86-64.so.2", "jail/lib64/ld-linux-x86-64.so.2") ||
	    !copy("/lib/x86_64-linux-gnu/libc.so.6", "jail/lib/x86_64-linux-gnu/libc.so.6") ||
	    !copy("/bin/true", "jail/bin/true"))
		unlink("jail/bin/true");
#endif
	errnos();
	int outfd = open(".", O_RDONLY | O_DIRECTORY);
	int p[2];
	if (pipe(p) < 0)
		return 1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		long r = chroot("jail");
		printf("chroot jail %s\n", outcome(r));
		fflush(stdout);
		if (r == 0)
			jailed(outfd);
		write(p[1], "x", 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	char c;
	read(p[0], &c, 1);
	char b[4096], proc[64];
	snprintf(proc, sizeof proc, "/proc/%d/root", pid);
	ssize_t n = readlink(proc, b, sizeof b - 1);
	b[n > 0 ? n : 0] = 0;
	printf("parent: /proc/PID/root ends in /jail: %s\n",
	       n > 5 && !strcmp(b + n - 5, "/jail") ? "yes" : b);
	kill(pid, 9);
	waitchild(pid);
	struct stat st;
	printf("parent: jail/created %s\n", outcome(stat("jail/created", &st)));
	printf("parent: created outside %s\n", outcome(stat("created", &st)));
	return 0;
}
