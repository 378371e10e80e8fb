/* cloexec: O_CLOEXEC / FD_CLOEXEC descriptors must be closed across
 * execve, plain ones must survive. The program re-execs itself with
 * "--check A B C" to inspect the descriptors on the other side. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int open_any(int flags)
{
	int fd = open("/etc/hostname", O_RDONLY | flags);
	if (fd < 0)
		fd = open("/dev/null", O_RDONLY | flags);
	return fd;
}

static int check(char **argv)
{
	int fd_cloexec = atoi(argv[2]);  /* opened with O_CLOEXEC */
	int fd_setfd = atoi(argv[3]);    /* FD_CLOEXEC set via fcntl */
	int fd_plain = atoi(argv[4]);    /* must survive */
	int ok = 1;

	if (fcntl(fd_cloexec, F_GETFD) != -1 || errno != EBADF) {
		printf("cloexec FAIL: O_CLOEXEC fd %d survived exec\n", fd_cloexec);
		ok = 0;
	}
	if (fcntl(fd_setfd, F_GETFD) != -1 || errno != EBADF) {
		printf("cloexec FAIL: F_SETFD FD_CLOEXEC fd %d survived exec\n", fd_setfd);
		ok = 0;
	}
	int fl = fcntl(fd_plain, F_GETFD);
	if (fl < 0) {
		printf("cloexec FAIL: plain fd %d closed by exec (%s)\n", fd_plain, strerror(errno));
		ok = 0;
	} else if (fl & FD_CLOEXEC) {
		printf("cloexec FAIL: plain fd %d has FD_CLOEXEC after exec\n", fd_plain);
		ok = 0;
	}
	if (!ok)
		return 1;
	puts("cloexec ok");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--check") == 0)
		return check(argv);

	int a = open_any(O_CLOEXEC);
	int b = open_any(0);
	int c = open_any(0);
	if (a < 0 || b < 0 || c < 0) {
		printf("cloexec FAIL: open: %s\n", strerror(errno));
		return 1;
	}
	if (fcntl(b, F_SETFD, FD_CLOEXEC) != 0) {
		printf("cloexec FAIL: F_SETFD: %s\n", strerror(errno));
		return 1;
	}
	if (!(fcntl(a, F_GETFD) & FD_CLOEXEC) || !(fcntl(b, F_GETFD) & FD_CLOEXEC) ||
	    (fcntl(c, F_GETFD) & FD_CLOEXEC)) {
		printf("cloexec FAIL: F_GETFD before exec\n");
		return 1;
	}

	char sa[16], sb[16], sc[16];
	snprintf(sa, sizeof(sa), "%d", a);
	snprintf(sb, sizeof(sb), "%d", b);
	snprintf(sc, sizeof(sc), "%d", c);
	char *args[] = { argv[0], "--check", sa, sb, sc, NULL };
	const char *self = strchr(argv[0], '/') ? argv[0] : "/proc/self/exe";
	fflush(stdout);
	execv(self, args);
	printf("cloexec FAIL: exec %s: %s\n", self, strerror(errno));
	return 1;
}
