/*
 * Shared-file behaviour that Linux guarantees and that tests compare
 * between a native run and a run under kbox: several opens of one file see
 * one file. Each subcommand prints what it saw; "ok" lines are checks.
 *
 *   coherent append2 FILE      two O_APPEND fds in one process
 *   coherent pwrite FILE       two processes pwrite disjoint ranges
 *   coherent mapshared FILE    MAP_SHARED in a parent and an exec'ed child
 *   coherent mapchild FILE     (the child of mapshared)
 *   coherent fstatsize FILE    fstat of one fd sees writes through another
 *   coherent truncate FILE     truncate(path) is seen through an open fd
 *   coherent reader FILE       a reader opening during writes sees them
 *   coherent sparse FILE       holes: SEEK_DATA/SEEK_HOLE, punch, st_blocks
 *   coherent fill FILE MB      write MB MiB (stopping at the first error),
 *                              report what write() said and the size
 *   coherent syncwrite FILE MB write MB MiB of a pattern, fsync, say so, wait
 *   coherent check FILE MB     check the pattern of syncwrite
 *   coherent fdcount           open fds of this process
 *   coherent openclose PATH FLAGS N   open/close N times (flags: r, w, a, c, d)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static long long fsize(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
}

static int append2(const char *f)
{
	unlink(f);
	int a = open(f, O_WRONLY | O_CREAT | O_APPEND, 0644);
	int b = open(f, O_WRONLY | O_CREAT | O_APPEND, 0644);
	CHECK(a >= 0 && b >= 0, "open");
	CHECK(write(a, "a", 1) == 1 && write(b, "b", 1) == 1 && write(a, "c", 1) == 1, "write");
	close(a);
	close(b);
	char buf[16] = {0};
	int r = open(f, O_RDONLY);
	CHECK(read(r, buf, sizeof buf - 1) == 3, "read back");
	close(r);
	printf("append2 %s\n", buf);
	return 0;
}

static void pattern(char *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)('A' + (seed + i) % 26);
}

static int pwrite2(const char *f)
{
	enum { N = 256 << 10 };
	unlink(f);
	int fd = open(f, O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0, "open");
	close(fd);
	for (int k = 0; k < 2; k++) {
		if (fork() == 0) {
			static char b[N];
			pattern(b, N, k);
			int w = open(f, O_WRONLY);
			/* interleaved 4 KiB pieces: each process its own */
			for (int off = 0; off < N; off += 8192)
				if (pwrite(w, b + off, 4096, (off_t)off + 4096 * k) != 4096)
					_exit(1);
			close(w);
			_exit(0);
		}
	}
	int st, ok = 1;
	while (wait(&st) > 0)
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	CHECK(ok, "children");
	static char got[N + 4096], want[2][N];
	pattern(want[0], N, 0);
	pattern(want[1], N, 1);
	fd = open(f, O_RDONLY);
	ssize_t n = read(fd, got, sizeof got);
	close(fd);
	int bad = 0;
	for (int off = 0; off < N; off += 8192)
		for (int k = 0; k < 2; k++)
			if (memcmp(got + off + 4096 * k, want[k] + off, 4096) != 0)
				bad++;
	printf("pwrite size=%zd bad=%d\n", n, bad);
	return 0;
}

static int mapshared(const char *self, const char *f)
{
	unlink(f);
	int fd = open(f, O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && ftruncate(fd, 8192) == 0, "create");
	char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED, "mmap");
	strcpy(p + 4096, "parent");
	pid_t c = fork();
	if (c == 0) {
		execl(self, self, "mapchild", f, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(c, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	printf("mapshared parent sees \"%s\"\n", p);
	CHECK(msync(p, 8192, MS_SYNC) == 0, "msync");
	char buf[16] = {0};
	int r = open(f, O_RDONLY);
	CHECK(pread(r, buf, 5, 0) == 5, "pread");
	printf("mapshared read \"%s\"\n", buf);
	close(r);
	munmap(p, 8192);
	close(fd);
	return 0;
}

static int mapchild(const char *f)
{
	int fd = open(f, O_RDWR);
	char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd < 0 || p == MAP_FAILED)
		return 1;
	printf("mapshared child sees \"%s\"\n", p + 4096);
	fflush(stdout);
	strcpy(p, "child");
	return msync(p, 8192, MS_SYNC) == 0 ? 0 : 2;
}

static int fstatsize(const char *f)
{
	unlink(f);
	int a = open(f, O_RDWR | O_CREAT, 0644);
	int b = open(f, O_RDONLY);
	char buf[100];
	memset(buf, 'x', sizeof buf);
	CHECK(write(a, buf, 100) == 100, "write");
	struct stat st;
	CHECK(stat(f, &st) == 0, "stat");
	printf("fstatsize fstat=%lld stat=%lld seekend=%lld\n", fsize(b), (long long)st.st_size,
	       (long long)lseek(b, 0, SEEK_END));
	close(a);
	close(b);
	return 0;
}

static int truncsee(const char *f)
{
	unlink(f);
	int a = open(f, O_RDWR | O_CREAT, 0644);
	char buf[100];
	memset(buf, 'y', sizeof buf);
	CHECK(write(a, buf, 100) == 100, "write");
	CHECK(truncate(f, 10) == 0, "truncate");
	char got[200];
	printf("truncate fstat=%lld pread=%zd\n", fsize(a), pread(a, got, sizeof got, 0));
	CHECK(truncate(f, 50) == 0, "truncate up");
	ssize_t n = pread(a, got, sizeof got, 0);
	printf("truncate up fstat=%lld pread=%zd tail0=%d\n", fsize(a), n, n == 50 && got[20] == 0);
	close(a);
	return 0;
}

static int reader(const char *f)
{
	unlink(f);
	int w = open(f, O_WRONLY | O_CREAT, 0644);
	CHECK(write(w, "first\n", 6) == 6, "write");
	int r = open(f, O_RDONLY);
	CHECK(write(w, "second\n", 7) == 7, "write 2");
	char buf[64] = {0};
	ssize_t n = read(r, buf, sizeof buf - 1);
	printf("reader n=%zd %s", n, buf);
	close(r);
	close(w);
	return 0;
}

static int sparse(const char *f)
{
	const off_t G = 1LL << 30;
	unlink(f);
	int fd = open(f, O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && ftruncate(fd, 2 * G) == 0, "ftruncate 2G");
	char buf[4096];
	memset(buf, 'z', sizeof buf);
	CHECK(pwrite(fd, buf, sizeof buf, G) == sizeof buf, "pwrite at 1G");
	CHECK(pwrite(fd, buf, sizeof buf, 1 << 20) == sizeof buf, "pwrite at 1M");
	CHECK(fsync(fd) == 0, "fsync");
	printf("sparse data@0=%lld hole@1M=%lld data@2M=%lld\n", (long long)lseek(fd, 0, SEEK_DATA),
	       (long long)lseek(fd, 1 << 20, SEEK_HOLE), (long long)lseek(fd, 2 << 20, SEEK_DATA));
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 << 20, 4096) == 0, "punch");
	CHECK(fsync(fd) == 0, "fsync 2");
	close(fd);
	fd = open(f, O_RDONLY);
	struct stat st;
	fstat(fd, &st);
	printf("sparse size=%lld small=%d data@0=%lld\n", (long long)st.st_size, st.st_blocks * 512LL <= 64 << 10,
	       (long long)lseek(fd, 0, SEEK_DATA));
	close(fd);
	return 0;
}

static int fill(const char *f, int mb)
{
	static char buf[1 << 20];
	memset(buf, 'f', sizeof buf);
	int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0, "open");
	long long total = 0;
	int err = 0;
	for (int i = 0; i < mb; i++) {
		ssize_t n = write(fd, buf, sizeof buf);
		if (n < 0) {
			err = errno;
			break;
		}
		total += n;
		if (n < (ssize_t)sizeof buf) {
			n = write(fd, buf, sizeof buf);
			err = n < 0 ? errno : 0;
			break;
		}
	}
	int fs = fsync(fd);
	int fserr = fs < 0 ? errno : 0;
	int cl = close(fd);
	struct stat st;
	stat(f, &st);
	printf("fill wrote=%lld err=%s fsync=%d/%s close=%d size=%lld match=%d\n", total, errname(err),
	       fs, errname(fserr), cl, (long long)st.st_size, st.st_size == total);
	return 0;
}

static int syncwrite(const char *f, int mb)
{
	static char buf[1 << 20];
	int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (int i = 0; i < mb; i++) {
		pattern(buf, sizeof buf, i);
		if (write(fd, buf, sizeof buf) != sizeof buf)
			return 1;
	}
	if (fsync(fd) != 0)
		return 2;
	printf("synced\n");
	fflush(stdout);
	pause();
	return 0;
}

static int check(const char *f, int mb)
{
	static char buf[1 << 20], want[1 << 20];
	int fd = open(f, O_RDONLY);
	int bad = 0;
	for (int i = 0; i < mb; i++) {
		pattern(want, sizeof want, i);
		if (read(fd, buf, sizeof buf) != sizeof buf || memcmp(buf, want, sizeof buf) != 0)
			bad++;
	}
	printf("check size=%lld bad=%d\n", fsize(fd), bad);
	return 0;
}

static int fdcount(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

static int openclose(const char *p, const char *how, int n)
{
	int flags = O_RDONLY;
	if (strchr(how, 'w'))
		flags = O_WRONLY;
	if (strchr(how, 'a'))
		flags = O_WRONLY | O_APPEND;
	if (strchr(how, 'c'))
		flags |= O_CREAT;
	if (strchr(how, 'd'))
		flags = O_RDONLY | O_DIRECTORY;
	if (strchr(how, 'n'))
		flags |= O_NONBLOCK;
	int before = fdcount();
	for (int i = 0; i < n; i++) {
		int fd = open(p, flags, 0644);
		if (fd < 0) {
			printf("openclose %s FAIL at %d: %s\n", p, i, strerror(errno));
			return 1;
		}
		if (strchr(how, 'x') && write(fd, "x\n", 2) != 2) {
			printf("openclose %s FAIL write at %d: %s\n", p, i, strerror(errno));
			return 1;
		}
		close(fd);
	}
	printf("openclose %s %s fds %d -> %d\n", p, how, before, fdcount());
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return 2;
	const char *cmd = argv[1], *f = argc > 2 ? argv[2] : "";
	int r = 2;
	if (!strcmp(cmd, "append2"))
		r = append2(f);
	else if (!strcmp(cmd, "pwrite"))
		r = pwrite2(f);
	else if (!strcmp(cmd, "mapshared"))
		r = mapshared("/proc/self/exe", f);
	else if (!strcmp(cmd, "mapchild"))
		return mapchild(f);
	else if (!strcmp(cmd, "fstatsize"))
		r = fstatsize(f);
	else if (!strcmp(cmd, "truncate"))
		r = truncsee(f);
	else if (!strcmp(cmd, "reader"))
		r = reader(f);
	else if (!strcmp(cmd, "sparse"))
		r = sparse(f);
	else if (!strcmp(cmd, "fill") && argc > 3)
		r = fill(f, atoi(argv[3]));
	else if (!strcmp(cmd, "syncwrite") && argc > 3)
		return syncwrite(f, atoi(argv[3]));
	else if (!strcmp(cmd, "check") && argc > 3)
		r = check(f, atoi(argv[3]));
	else if (!strcmp(cmd, "fdcount")) {
		printf("fds %d\n", fdcount());
		r = 0;
	} else if (!strcmp(cmd, "openclose") && argc > 4)
		r = openclose(f, argv[3], atoi(argv[4]));
	return r ? r : bad;
}
