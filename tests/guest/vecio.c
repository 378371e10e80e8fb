/* vecio: vectored I/O and fallocate on a file kbox serves through a
 * virtual fd (a file above the shadow size cap, see KBOX_SHADOW_MAX).
 *
 *   vecio FILE      FILE must exist and be larger than the cap
 *
 * prints "vecio ok" or the first failed step. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fd = open(argv[1], O_RDWR);
	REQUIRE(fd >= 0, "open");
	printf("vecio: fd %d%s\n", fd, fd >= 1024 ? " (virtual)" : "");

	struct iovec w[2] = { { "hello ", 6 }, { "world", 5 } };
	REQUIRE(writev(fd, w, 2) == 11, "writev");
	struct iovec pw[2] = { { "abc", 3 }, { "def", 3 } };
	REQUIRE(pwritev(fd, pw, 2, 100) == 6, "pwritev");

	char a[6], b[5], c[3], d[3], e[1];
	REQUIRE(lseek(fd, 0, SEEK_SET) == 0, "lseek");
	struct iovec r[2] = { { a, 6 }, { b, 5 } };
	REQUIRE(readv(fd, r, 2) == 11 && !memcmp(a, "hello ", 6) && !memcmp(b, "world", 5), "readv");
	struct iovec pr[2] = { { c, 3 }, { d, 3 } };
	REQUIRE(preadv(fd, pr, 2, 100) == 6 && !memcmp(c, "abc", 3) && !memcmp(d, "def", 3), "preadv");
	struct iovec one = { e, 1 };
	/* musl has no preadv2 wrapper; on 64-bit, pos_l carries the offset. */
	REQUIRE(syscall(SYS_preadv2, fd, &one, 1, -1L, 0L, 0) == 1 && e[0] == '\0', "preadv2 at the file position");
	REQUIRE(lseek(fd, 0, SEEK_CUR) == 12, "position after preadv2");
	REQUIRE(preadv(fd, &one, 1, -5) < 0, "preadv with a negative offset fails");

	REQUIRE(fallocate(fd, 0, 0, 50000) == 0, "fallocate");
	struct stat st;
	REQUIRE(fstat(fd, &st) == 0 && st.st_size == 50000, "size after fallocate");
	REQUIRE(close(fd) == 0, "close");
	puts("vecio ok");
	return 0;
}
