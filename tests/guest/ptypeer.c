/* ptypeer: a pseudo-terminal's slave taken with TIOCGPTPEER (glibc's
 * openpty asks it first), and the fd numbers a guest is given. It prints:
 *   - the master's and slave's fd numbers;
 *   - whether the slave's /proc/self/fd link and ttyname name /dev/pts/N,
 *     N its TIOCGPTN;
 *   - whether the master's link names a ptmx (/dev/ptmx or
 *     /dev/pts/ptmx: Linux names the node that was opened);
 *   - the numbers of six opens and of a pipe, and dup2 onto 4 and 5.
 * Natively each number is the lowest free one; fds a parent left open
 * are closed first, so that both runs start from 0, 1 and 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

static const char *link_of(int fd, char *buf, size_t len)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, buf, len - 1);
	if (n < 0)
		return strerror(errno);
	buf[n] = 0;
	return buf;
}

int main(void)
{
	syscall(SYS_close_range, 3, 1023, 0);
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY);
	int unlock = 0, n = -1;
	if (m < 0 || ioctl(m, TIOCSPTLCK, &unlock) || ioctl(m, TIOCGPTN, &n)) {
		printf("ptmx: %s\n", strerror(errno));
		return 1;
	}
	int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY);
	if (s < 0) {
		printf("TIOCGPTPEER: %s\n", strerror(errno));
		return 1;
	}
	printf("master %d slave %d\n", m, s);
	char want[64], buf[256];
	snprintf(want, sizeof want, "/dev/pts/%d", n);
	const char *l = link_of(s, buf, sizeof buf);
	printf("slave link: %s\n", strcmp(l, want) ? l : "/dev/pts/N");
	char *t = ttyname(s);
	printf("slave ttyname: %s\n", !t ? strerror(errno) : strcmp(t, want) ? t : "/dev/pts/N");
	printf("slave isatty: %d\n", isatty(s));
	l = link_of(m, buf, sizeof buf);
	printf("master link: %s\n",
	       !strcmp(l, "/dev/ptmx") || !strcmp(l, "/dev/pts/ptmx") ? "ptmx" : l);
	printf("opens:");
	for (int i = 0; i < 6; i++)
		printf(" %d", open("/etc/passwd", O_RDONLY));
	int p[2];
	if (pipe(p))
		printf("\npipe: %s\n", strerror(errno));
	else
		printf("\npipe: %d %d\n", p[0], p[1]);
	for (int fd = 4; fd <= 5; fd++) {
		int r = dup2(p[0], fd);
		printf("dup2 onto %d: %s\n", fd, r < 0 ? strerror(errno) : r == fd ? "ok" : "other");
	}
	return 0;
}
