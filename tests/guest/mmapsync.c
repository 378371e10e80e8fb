/* mmapsync: stores through a MAP_SHARED writable mapping of an image file
 * reach the image: after msync (seen by another process while the writer
 * still has the file mapped and open), after munmap+close without msync,
 * and (mode "exit") when the process exits with the mapping and fd still
 * open, for a later run to check ("check").
 *   mmapsync          steps 1 and 2, prints "mmapsync ok"
 *   mmapsync exit     stores "exit-data" at offset 200 and _exit(0)s
 *   mmapsync check    prints what is at offsets 0, 100 and 200
 *   mmapsync churn    maps the file (made 4096 bytes if it is not), closes
 *                     the fd, opens 600 other files of its own, then stores
 *                     "churn-data" at offset 300 and munmaps: kbox trims
 *                     its shadows between, and must count the mapping as a
 *                     holder (in-process tiers: the guest's mappings are
 *                     kbox's own). "check" then shows it at300. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *path = "/root/mmapsync.dat";

/* peek reads len bytes at off in a child process (its own open of the
 * file, so a fresh copy from the image) and compares them with want. */
static int peek(off_t off, const char *want)
{
	pid_t pid = fork();
	if (pid == 0) {
		char buf[64] = {0};
		int fd = open(path, O_RDONLY);
		if (fd < 0 || pread(fd, buf, strlen(want), off) != (ssize_t)strlen(want))
			_exit(2);
		_exit(memcmp(buf, want, strlen(want)) != 0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static char *map(int *fdp)
{
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		perror("open");
		return NULL;
	}
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return NULL;
	}
	*fdp = fd;
	return p;
}

int main(int argc, char **argv)
{
	int fd, bad = 0;
	char *p;

	if (argc > 1 && strcmp(argv[1], "check") == 0) {
		char buf[4096] = {0};
		fd = open(path, O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof buf) != 4096)
			return 1;
		printf("at0=%s at100=%s at200=%s at300=%s\n", buf, buf + 100, buf + 200, buf + 300);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "exit") == 0) {
		if (!(p = map(&fd)))
			return 1;
		memcpy(p + 200, "exit-data", 10);
		_exit(0); /* no msync, munmap or close */
	}

	if (argc > 1 && strcmp(argv[1], "churn") == 0) {
		fd = open(path, O_RDWR | O_CREAT, 0644);
		if (fd < 0 || ftruncate(fd, 4096) != 0 || close(fd) != 0) {
			perror("create");
			return 1;
		}
		if (!(p = map(&fd)))
			return 1;
		close(fd);
		if (mkdir("/root/churn", 0755) != 0 && errno != EEXIST) {
			perror("mkdir");
			return 1;
		}
		for (int i = 0; i < 600; i++) {
			char name[64];
			snprintf(name, sizeof name, "/root/churn/f%d", i);
			int f = open(name, O_RDWR | O_CREAT, 0644);
			if (f < 0 || write(f, "x", 1) != 1 || close(f) != 0) {
				perror(name);
				return 1;
			}
		}
		memcpy(p + 300, "churn-data", 11);
		munmap(p, 4096);
		printf("churn done\n");
		return 0;
	}

	char zero[4096] = {0};
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, zero, sizeof zero) != sizeof zero || close(fd) != 0) {
		perror("create");
		return 1;
	}
	/* 1: msync makes the stores visible to another process at once. */
	if (!(p = map(&fd)))
		return 1;
	memcpy(p, "msync-data", 11);
	if (msync(p, 4096, MS_SYNC) != 0) {
		perror("msync");
		bad = 1;
	}
	if (!peek(0, "msync-data")) {
		printf("mmapsync FAIL: msync'd data not seen by another process\n");
		bad = 1;
	}
	/* 2: stores after that, then munmap and close without msync. */
	memcpy(p + 100, "close-data", 11);
	munmap(p, 4096);
	close(fd);
	if (!peek(100, "close-data")) {
		printf("mmapsync FAIL: data stored before munmap+close lost\n");
		bad = 1;
	}
	if (!bad)
		printf("mmapsync ok\n");
	return bad;
}
