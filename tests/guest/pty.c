/* pty: a pseudo-terminal pair for a guest, as script(1) makes one.
 * "pty CMD" opens a master with posix_openpt (/dev/ptmx), grantpt,
 * unlockpt, opens the slave by its ptsname (/dev/pts/N), checks that the
 * slave is pty N (its rdev, TIOCGPTN), and prints "pty N dev MAJ:MIN"
 * (MAJ:MIN: the device of the devpts instance holding the slave). It then
 * runs /bin/sh -c CMD in a child that has the slave as its controlling
 * terminal and stdio (login_tty), prints every line the master reads
 * ("out: LINE", carriage returns dropped) until the slave side is gone,
 * and "status S" with the child's exit status. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <utmp.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: pty CMD\n");
		return 2;
	}
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m)) {
		printf("pty FAIL: posix_openpt: %s\n", strerror(errno));
		return 1;
	}
	char *name = ptsname(m);
	int n = -1;
	if (!name || ioctl(m, TIOCGPTN, &n)) {
		printf("pty FAIL: ptsname: %s\n", strerror(errno));
		return 1;
	}
	int s = open(name, O_RDWR | O_NOCTTY);
	struct stat st;
	if (s < 0 || fstat(s, &st)) {
		printf("pty FAIL: open %s: %s\n", name, strerror(errno));
		return 1;
	}
	if (!S_ISCHR(st.st_mode) || (int)(((major(st.st_rdev) - 136) << 8) | minor(st.st_rdev)) != n) {
		printf("pty FAIL: %s is %u:%u, not pty %d\n", name, major(st.st_rdev), minor(st.st_rdev), n);
		return 1;
	}
	printf("pty %d dev %u:%u\n", n, major(st.st_dev), minor(st.st_dev));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(m);
		if (login_tty(s)) {
			perror("login_tty");
			_exit(126);
		}
		execl("/bin/sh", "sh", "-c", argv[1], (char *)0);
		_exit(127);
	}
	close(s);
	char buf[4096], line[4096];
	size_t len = 0;
	for (;;) {
		ssize_t r = read(m, buf, sizeof buf);
		if (r <= 0)
			break; /* EIO once the slave side is closed */
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] == '\r')
				continue;
			if (buf[i] == '\n' || len == sizeof line - 1) {
				line[len] = 0;
				printf("out: %s\n", line);
				len = 0;
				continue;
			}
			line[len++] = buf[i];
		}
	}
	if (len) {
		line[len] = 0;
		printf("out: %s\n", line);
	}
	int status;
	waitpid(pid, &status, 0);
	printf("status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}
