/* ioerr: what a guest sees of a failing disk (the I/O-error fault test).
 *
 *   ioerr read FILE    open FILE, read it to the end
 *   ioerr fsync FILE   open FILE read-write, overwrite its first 4 KiB,
 *                      fsync, fsync again
 *
 * Prints one line per step: "STEP ok [N]" or "STEP errno NAME". Exits 0
 * when every step succeeded, 1 otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static int step(const char *what, long r)
{
	if (r < 0) {
		printf("%s errno %s\n", what, errname(errno));
		return 1;
	}
	printf("%s ok %ld\n", what, r);
	return 0;
}

int main(int argc, char **argv)
{
	static char buf[65536];
	int fd, bad = 0;
	long n, total = 0;

	if (argc != 3 || (strcmp(argv[1], "read") && strcmp(argv[1], "fsync"))) {
		fprintf(stderr, "usage: ioerr read|fsync FILE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!strcmp(argv[1], "read")) {
		fd = open(argv[1 + 1], O_RDONLY);
		if (step("open", fd))
			return 1;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			total += n;
		bad |= step("read", n < 0 ? -1 : total);
		return bad | step("close", close(fd));
	}
	fd = open(argv[2], O_RDWR);
	if (step("open", fd))
		return 1;
	memset(buf, 'x', 4096);
	bad |= step("pwrite", pwrite(fd, buf, 4096, 0));
	bad |= step("fsync", fsync(fd));
	/* Linux reports a write-back error once per open file. */
	bad |= step("fsync-again", fsync(fd));
	return bad | step("close", close(fd));
}
