/*
 * mapvirt: mmap of files kbox serves as virtual fds (above
 * KBOX_SHADOW_MAX; tests/mapvirt_test.go runs it with a cap of 4 KiB),
 * compared line by line with the same program run natively. A library
 * or pack file bigger than the cap used to be EBADF to map.
 *
 * Usage: mapvirt DIR make   writes DIR/a and DIR/b (48 KiB + 100 bytes
 *                           each, b's bytes differ from a's) and exits;
 *        mapvirt DIR [fork] maps them: windows, private writes, the end
 *                           of the file (SIGBUS past its last page),
 *                           errors, /proc/self/maps, a dup, a number
 *                           reused by another file, and with fork a
 *                           child's map.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define SIZE (48 * 1024 + 100)
#define PAGE 4096

static unsigned char byte(int seed, long i) { return (unsigned char)(i * 7 + i / PAGE + seed); }

static char a[256], b[256];

/* sum of n bytes at p, and whether they are the file's from offset off */
static void window(const char *what, const unsigned char *p, long off, long n, int seed)
{
	long bad = -1;

	for (long i = 0; i < n; i++)
		if (p[i] != byte(seed, off + i)) {
			bad = off + i;
			break;
		}
	printf("%s: %s\n", what, bad < 0 ? "the file's bytes" : "other bytes");
}

static void make(const char *path, int seed)
{
	static unsigned char buf[SIZE];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	for (long i = 0; i < SIZE; i++)
		buf[i] = byte(seed, i);
	REQUIRE(fd >= 0 && write(fd, buf, SIZE) == SIZE && close(fd) == 0, "write %s", path);
}

static void *map(const char *what, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		printf("%s: %s\n", what, errname(errno));
	return p == MAP_FAILED ? NULL : p;
}

/* what /proc/self/maps says of the mapping at p of fd's file, path */
static void maps(const unsigned char *p, int fd, const char *path)
{
	char line[512], want[32];
	unsigned long ino = 0;
	struct stat st;
	FILE *f = fopen("/proc/self/maps", "r");
	int named = 0, same = 0;

	snprintf(want, sizeof want, "%lx-", (unsigned long)p);
	REQUIRE(f && fstat(fd, &st) == 0, "maps");
	while (fgets(line, sizeof line, f))
		if (strncmp(line, want, strlen(want)) == 0) {
			line[strcspn(line, "\n")] = 0;
			named = strlen(line) > strlen(path) && strcmp(line + strlen(line) - strlen(path), path) == 0;
			sscanf(line, "%*s %*s %*s %*s %lu", &ino);
			same = ino == st.st_ino;
		}
	fclose(f);
	printf("maps: the file's path %s, its inode %s\n", named ? "yes" : "no", same ? "yes" : "no");
}

static sigjmp_buf jb;

static void onbus(int sig)
{
	siglongjmp(jb, sig);
}

int main(int argc, char **argv)
{
	unsigned char *p;
	char c;
	int fd, d, w, o, dir;

	REQUIRE(argc >= 2, "usage: mapvirt DIR [make|fork]");
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(a, sizeof a, "%s/a", argv[1]);
	snprintf(b, sizeof b, "%s/b", argv[1]);
	if (argc == 3 && strcmp(argv[2], "make") == 0) {
		make(a, 0);
		make(b, 99);
		return bad;
	}
	fd = open(a, O_RDONLY);
	REQUIRE(fd >= 0, "open %s", a);
	if ((p = map("private read at page 2", 3 * PAGE, PROT_READ, MAP_PRIVATE, fd, 2 * PAGE))) {
		window("private read at page 2", p, 2 * PAGE, 3 * PAGE, 0);
		munmap(p, 3 * PAGE);
	}
	if ((p = map("shared read, whole", SIZE, PROT_READ, MAP_SHARED, fd, 0))) {
		window("shared read, whole", p, 0, SIZE, 0);
		maps(p, fd, a);
		munmap(p, SIZE);
	}
	if ((p = map("private write", 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))) {
		memset(p, 'x', 2 * PAGE);
		CHECK(pread(fd, &c, 1, 0) == 1, "pread");
		printf("private write: the file's first byte %s\n", c == (char)byte(0, 0) ? "kept" : "changed");
		munmap(p, 2 * PAGE);
	}
	/* The last page holds the end; the page after it is past the file. */
	if ((p = map("the end", 2 * PAGE, PROT_READ, MAP_SHARED, fd, SIZE / PAGE * PAGE))) {
		volatile unsigned char *q = p;
		int sig;

		window("the end, within the file", p, SIZE / PAGE * PAGE, SIZE % PAGE, 0);
		printf("the end, past the file's bytes in its page: %d\n", q[SIZE % PAGE + 1]);
		signal(SIGBUS, onbus);
		if ((sig = sigsetjmp(jb, 1)) == 0)
			printf("the end, the next page: %d\n", q[PAGE]);
		else
			printf("the end, the next page: signal %s\n", sig == SIGBUS ? "SIGBUS" : "other");
		signal(SIGBUS, SIG_DFL);
		munmap(p, 2 * PAGE);
	}
	map("offset not a page's", PAGE, PROT_READ, MAP_PRIVATE, fd, 100);
	map("no length", 0, PROT_READ, MAP_PRIVATE, fd, 0);
	d = dup(fd);
	if ((p = map("a dup", PAGE, PROT_READ, MAP_PRIVATE, d, PAGE))) {
		window("a dup", p, PAGE, PAGE, 0);
		munmap(p, PAGE);
	}
	close(d);
	w = open(a, O_WRONLY);
	map("write-only", PAGE, PROT_READ, MAP_SHARED, w, 0);
	close(w);
	o = open(a, O_PATH);
	map("O_PATH", PAGE, PROT_READ, MAP_PRIVATE, o, 0);
	close(o);
	dir = open(argv[1], O_RDONLY | O_DIRECTORY);
	map("a directory", PAGE, PROT_READ, MAP_PRIVATE, dir, 0);
	close(dir);
	/* fd's number again, now b: b's bytes, not a's window. */
	close(fd);
	map("a closed fd", PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
	d = open(b, O_RDONLY);
	printf("b has a's number: %s\n", d == fd ? "yes" : "no");
	if ((p = map("b", PAGE, PROT_READ, MAP_PRIVATE, d, 0))) {
		window("b", p, 0, PAGE, 99);
		munmap(p, PAGE);
	}
	if (argc == 3 && strcmp(argv[2], "fork") == 0) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			if ((p = map("b in a child", PAGE, PROT_READ, MAP_PRIVATE, d, 4 * PAGE)))
				window("b in a child", p, 4 * PAGE, PAGE, 99);
			fflush(stdout);
			_exit(bad);
		}
		CHECK(waitpid(pid, &st, 0) == pid && st == 0, "child status %d", st);
	}
	close(d);
	return bad;
}
