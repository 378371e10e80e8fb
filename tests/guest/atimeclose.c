/*
 * atimeclose FILE: opens FILE read-only, reads it whole and closes it,
 * printing the realtime clock's seconds before the open and after the
 * close, then sleeps 1.5 s and exits without asking for any time of the
 * file (tests/atime_test.go, TestAtimeAtClose). On Linux the read gives
 * the file its access time: a later run's stat must find a time between
 * the two printed, not one of the exit's.
 */
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	REQUIRE(argc == 2, "usage: atimeclose FILE");
	struct timespec before, after, nap = { 1, 500000000 };
	char buf[4096];
	clock_gettime(CLOCK_REALTIME, &before);
	int fd = open(argv[1], O_RDONLY);
	REQUIRE(fd >= 0, "open %s", argv[1]);
	while (read(fd, buf, sizeof buf) > 0)
		;
	CHECK(close(fd) == 0, "close");
	clock_gettime(CLOCK_REALTIME, &after);
	printf("%lld %lld\n", (long long)before.tv_sec, (long long)after.tv_sec);
	fflush(stdout);
	nanosleep(&nap, 0);
	return bad;
}
