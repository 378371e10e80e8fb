/*
 * accmode: an fd's access mode is the open's, whatever kbox serves the
 * file with. Reads of a write-only fd and writes of a read-only one fail
 * (EBADF), and so does sendfile from a write-only fd. One line per call,
 * errno by name, compared with the same program run natively
 * (tests/accmode_test.go). A file of 10,000 bytes is a shadow by default
 * and a virtual fd above KBOX_SHADOW_MAX=4096.
 *
 * Usage: accmode DIR [make]. DIR is made (mode 0755) and its files are
 * written unless they exist; with "make" that is all. As root the calls
 * also run as nobody on nobody's files, one of them mode 0222
 * (write-only for its owner). A file written by another process that
 * has exited is a virtual fd above KBOX_SHADOW_MAX; one this process
 * wrote keeps its shadow.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"

static void show(const char *tag, const char *call, long r)
{
	printf("%s %s: %s\n", tag, call, r < 0 ? errname(errno) : "ok");
}

static void make(const char *path, mode_t mode, uid_t owner)
{
	static char zeros[10000];
	int fd;

	if (access(path, F_OK) == 0)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	REQUIRE(fd >= 0, "create %s", path);
	REQUIRE(write(fd, zeros, sizeof zeros) == sizeof zeros, "fill %s", path);
	REQUIRE(fchown(fd, owner, owner) == 0 && fchmod(fd, mode) == 0, "own %s", path);
	close(fd);
}

static void calls(const char *tag, const char *path)
{
	char b[8];
	struct iovec v = {b, sizeof b};
	off_t off = 0;
	int w = open(path, O_WRONLY), r, d, sink;

	show(tag, "open write-only", w);
	if (w < 0)
		return;
	show(tag, "read", read(w, b, sizeof b));
	show(tag, "pread", pread(w, b, sizeof b, 0));
	show(tag, "readv", readv(w, &v, 1));
	show(tag, "preadv", preadv(w, &v, 1, 0));
	d = dup(w);
	show(tag, "read of a dup", read(d, b, sizeof b));
	sink = open("/dev/null", O_WRONLY);
	show(tag, "sendfile from", sendfile(sink, w, &off, sizeof b));
	printf("%s access mode %d\n", tag, fcntl(w, F_GETFL) & O_ACCMODE);
	show(tag, "write", write(w, "abc", 3));
	show(tag, "pwrite", pwrite(w, "abc", 3, 100));
	close(sink);
	close(d);
	close(w);

	r = open(path, O_RDONLY);
	show(tag, "open read-only", r);
	if (r < 0)
		return;
	show(tag, "write", write(r, "x", 1));
	show(tag, "pwrite", pwrite(r, "x", 1, 0));
	show(tag, "writev", writev(r, &v, 1));
	show(tag, "read", read(r, b, 3));
	printf("%s access mode %d\n", tag, fcntl(r, F_GETFL) & O_ACCMODE);
	close(r);
}

int main(int argc, char **argv)
{
	char f[256], g[256], h[256];

	REQUIRE(argc == 2 || argc == 3, "usage: accmode DIR [make]");
	REQUIRE(mkdir(argv[1], 0755) == 0 || errno == EEXIST, "mkdir %s", argv[1]);
	REQUIRE(chmod(argv[1], 0755) == 0, "chmod %s", argv[1]);
	snprintf(f, sizeof f, "%s/root-file", argv[1]);
	snprintf(g, sizeof g, "%s/nobody-file", argv[1]);
	snprintf(h, sizeof h, "%s/nobody-0222", argv[1]);
	make(f, 0644, geteuid());
	if (geteuid() == 0) {
		make(g, 0644, 65534);
		make(h, 0222, 65534);
	}
	if (argc == 3)
		return bad;
	calls("owner", f);
	if (geteuid() != 0)
		return bad;
	REQUIRE(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0, "become nobody");
	calls("nobody", g);
	calls("nobody 0222", h);
	calls("nobody, root's", f);
	return bad;
}
