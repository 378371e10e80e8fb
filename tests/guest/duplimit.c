/* fcntl(F_DUPFD, F_DUPFD_CLOEXEC) and dup2/dup3 of a host fd at and above
 * RLIMIT_NOFILE (made 1024, the guest's): EINVAL and EBADF, to compare with
 * Linux (tests/pathdots_test.go). */
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/resource.h>
#define T(name, call) do { errno = 0; long r = (call); printf("%-32s %ld %s\n", name, r, r < 0 ? strerror(errno) : ""); } while (0)
int main(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur > 1024) {
		rl.rlim_cur = 1024;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int lim = getdtablesize();
	printf("getdtablesize %d\n", lim);
	int f = open("/proc/self/exe", O_RDONLY);
	T("F_DUPFD at the limit", fcntl(f, F_DUPFD, lim));
	T("F_DUPFD_CLOEXEC at the limit", fcntl(f, F_DUPFD_CLOEXEC, lim));
	T("F_DUPFD above the limit", fcntl(f, F_DUPFD, lim + 5));
	T("F_DUPFD_CLOEXEC far above it", fcntl(f, F_DUPFD_CLOEXEC, 100000));
	T("F_DUPFD negative", fcntl(f, F_DUPFD, -1));
	T("F_DUPFD below the limit", fcntl(f, F_DUPFD, lim - 1) == lim - 1 ? 0 : -1);
	T("dup2 at the limit", dup2(f, lim));
	T("dup3 at the limit", dup3(f, lim, O_CLOEXEC));
	return 0;
}
