/*
 * execatime PROG [SEC NSEC]: PROG is a copy of this program, not read
 * since its last change, on a relatime mount. Without SEC and NSEC it
 * stats PROG, whose answer kbox's stat cache now holds, then execs PROG
 * with that access time; PROG stats itself and prints the access time
 * before the exec and after it, seconds and nanoseconds
 * (tests/atime_test.go, TestAtimeExec). On Linux the exec's reads of
 * the file move its access time, as a read would.
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	REQUIRE(argc == 2 || argc == 4, "usage: execatime PROG [SEC NSEC]");
	struct stat st;
	REQUIRE(stat(argv[1], &st) == 0, "stat %s", argv[1]);
	if (argc == 2) {
		char sec[32], nsec[32];
		snprintf(sec, sizeof sec, "%lld", (long long)st.st_atim.tv_sec);
		snprintf(nsec, sizeof nsec, "%ld", st.st_atim.tv_nsec);
		execl(argv[1], argv[1], argv[1], sec, nsec, (char *)0);
		REQUIRE(0, "exec %s", argv[1]);
	}
	printf("%s %s %lld %ld\n", argv[2], argv[3], (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
	return bad;
}
