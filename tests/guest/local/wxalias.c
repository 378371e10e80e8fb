/*
 * wxalias: code written through one shared mapping of a memfd and run
 * through a second, executable one (the dual mapping JITs use to keep
 * every single mapping W^X). For TestWXAlias (tests/hostile_test.go).
 *
 * It writes `mov $NR,%eax; syscall; ret` for getpid, runs it 100 times,
 * rewrites it through the writable view for getuid and runs it again:
 * the new code must be what runs (no stale patch), and each call must
 * give what the libc call gives. Then it asks for one mapping both
 * writable and executable and prints whether that was refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int run(unsigned char *rw, void *rx, int nr, long want, const char *name)
{
	unsigned char code[] = {0xb8, nr, 0, 0, 0, 0x0f, 0x05, 0xc3};
	memcpy(rw, code, sizeof code);
	long (*f)(void) = (long (*)(void))rx;
	for (int i = 0; i < 100; i++) {
		long got = f();
		if (got != want) {
			printf("%s through the alias: call %d gave %ld, want %ld\n", name, i, got, want);
			return 1;
		}
	}
	return 0;
}

int main(void)
{
	int fd = memfd_create("wxalias", 0);
	if (fd < 0 || ftruncate(fd, 4096) < 0) {
		perror("memfd");
		return 2;
	}
	unsigned char *rw = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	void *rx = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED || rx == MAP_FAILED) {
		printf("dual mapping refused: %s\n", strerror(errno));
		return 1;
	}
	if (run(rw, rx, 39, getpid(), "getpid") || run(rw, rx, 102, getuid(), "getuid"))
		return 1;
	void *wx = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("alias: getpid and getuid ok; one mapping writable and executable: %s\n",
	       wx == MAP_FAILED ? strerror(errno) : "mapped");
	return 0;
}
