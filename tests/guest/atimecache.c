/*
 * atimecache FILE: FILE's access time is older than its last change, on
 * a relatime mount. It stats FILE, reads it whole and closes it, then
 * stats it twice, and prints the three access times, seconds and
 * nanoseconds (tests/atime_test.go, TestAtimeStatCache). On Linux the
 * read gives the file a new access time, which both later stats show;
 * under kbox the first stat's answer is in its stat cache, which a read
 * of the file's shadow does not make stale.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	REQUIRE(argc == 2, "usage: atimecache FILE");
	struct stat st[3];
	char buf[4096];
	REQUIRE(stat(argv[1], &st[0]) == 0, "stat %s", argv[1]);
	int fd = open(argv[1], O_RDONLY);
	REQUIRE(fd >= 0, "open %s", argv[1]);
	while (read(fd, buf, sizeof buf) > 0)
		;
	CHECK(close(fd) == 0, "close");
	REQUIRE(stat(argv[1], &st[1]) == 0, "stat %s", argv[1]);
	REQUIRE(stat(argv[1], &st[2]) == 0, "stat %s", argv[1]);
	for (int i = 0; i < 3; i++)
		printf("%lld %ld ", (long long)st[i].st_atim.tv_sec, st[i].st_atim.tv_nsec);
	printf("\n");
	return bad;
}
