/*
 * imagewrites: tries to write more to the image than limits.image_writes
 * allows (tests/policy_test.go TestPolicyImageWrites).
 *
 *   imagewrites files DIR N MIB   N files of MIB MiB each, 1 MiB writes
 *   imagewrites mmap FILE MIB     a shared mapping of MIB MiB, filled, msync
 *   imagewrites sparse FILE MIB   a 100 MiB sparse file (a virtual fd when
 *                                 reopened), MIB MiB written at 1 MiB steps
 *
 * Prints "wrote N" (bytes that the calls reported written) and the first
 * error as "error ERRNO-NAME-OR-SIGNAL"; exit status 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"

static char buf[1 << 20];
static sigjmp_buf jb;
static void onbus(int s) { siglongjmp(jb, s); }

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	memset(buf, 'x', sizeof buf);
	long long wrote = 0;
	const char *err = "none";
	if (strcmp(argv[1], "files") == 0 && argc == 5) {
		int n = atoi(argv[3]), mib = atoi(argv[4]);
		for (int i = 0; i < n && strcmp(err, "none") == 0; i++) {
			char p[4096];
			snprintf(p, sizeof p, "%s/f%d", argv[2], i);
			int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
			if (fd < 0) {
				err = errname(errno);
				break;
			}
			for (int k = 0; k < mib; k++) {
				ssize_t w = write(fd, buf, sizeof buf);
				if (w > 0)
					wrote += w;
				if (w != (ssize_t)sizeof buf) {
					err = w < 0 ? errname(errno) : "short";
					break;
				}
			}
			if (fsync(fd) < 0 && strcmp(err, "none") == 0)
				err = errname(errno);
			close(fd);
		}
	} else if (strcmp(argv[1], "mmap") == 0) {
		long len = atol(argv[3]) << 20;
		int fd = open(argv[2], O_CREAT | O_TRUNC | O_RDWR, 0644);
		if (fd < 0 || ftruncate(fd, len) < 0) {
			printf("setup %s\n", strerror(errno));
			return 1;
		}
		char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			printf("mmap %s\n", strerror(errno));
			return 1;
		}
		signal(SIGBUS, onbus);
		volatile long done = 0;
		if (sigsetjmp(jb, 1) == 0) {
			for (long off = 0; off < len; off += 4096) {
				m[off] = 'x';
				done = off + 4096;
			}
			if (msync(m, len, MS_SYNC) < 0)
				err = errname(errno);
			else if (fsync(fd) < 0)
				err = errname(errno);
		} else
			err = "SIGBUS";
		wrote = done;
	} else if (strcmp(argv[1], "sparse") == 0) {
		int mib = atoi(argv[3]);
		int fd = open(argv[2], O_CREAT | O_TRUNC | O_RDWR, 0644);
		if (fd < 0 || ftruncate(fd, 100L << 20) < 0) {
			printf("setup %s\n", strerror(errno));
			return 1;
		}
		close(fd);
		fd = open(argv[2], O_RDWR);
		if (fd < 0) {
			printf("reopen %s\n", strerror(errno));
			return 1;
		}
		for (int k = 0; k < mib; k++) {
			ssize_t w = pwrite(fd, buf, sizeof buf, (off_t)k * (2 << 20));
			if (w > 0)
				wrote += w;
			if (w != (ssize_t)sizeof buf) {
				err = w < 0 ? errname(errno) : "short";
				break;
			}
		}
		close(fd);
	} else
		return 2;
	printf("wrote %lld\nerror %s\n", wrote, err);
	return 0;
}
