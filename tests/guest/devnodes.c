/* devnodes: what opening device nodes gives. For each PATH argument it
 * opens PATH read-write (write-only for a path ending in "!w"),
 * non-blocking, and prints
 * one line: "PATH: fd F host H rdev MAJ:MIN", H being 1 when F is below
 * kbox's virtual fd base (1024: a host fd, native I/O), then "read N" with
 * the bytes a 16-byte read gave (and "zeros" when all were 0), then
 * "write R" with the result of writing one byte (or its errno name); or
 * "PATH: open ERRNO" when the open fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "check.h"

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s", argv[i]);
		int wonly = 0;
		size_t n = strlen(path);
		if (n > 2 && strcmp(path + n - 2, "!w") == 0) {
			path[n - 2] = 0;
			wonly = 1;
		}
		int fd = open(path, (wonly ? O_WRONLY : O_RDWR) | O_NOCTTY | O_NONBLOCK);
		if (fd < 0) {
			printf("%s: open %s\n", path, errname(errno));
			continue;
		}
		struct stat st;
		fstat(fd, &st);
		printf("%s: fd %d host %d rdev %u:%u", path, fd, fd < 1024, major(st.st_rdev), minor(st.st_rdev));
		if (!wonly) {
			unsigned char b[16];
			memset(b, 0xff, sizeof b);
			ssize_t r = read(fd, b, sizeof b);
			int zeros = r > 0;
			for (ssize_t k = 0; k < r; k++)
				zeros &= b[k] == 0;
			printf(" read %zd%s", r, zeros ? " zeros" : "");
		}
		ssize_t w = write(fd, "x", 1);
		if (w < 0)
			printf(" write %s\n", errname(errno));
		else
			printf(" write %zd\n", w);
		close(fd);
	}
	return 0;
}
