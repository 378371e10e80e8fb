/* unpack DIR N: writes N files into DIR as dpkg unpacks a package, then
 * prints what each became. Each file is written to NAME.dpkg-new, its
 * writeback started (sync_file_range), its owner, mode and times set
 * while the writer's fd is still open (times by path: utimensat), and
 * closed; then each is opened again, fsynced, closed and renamed over
 * NAME. The lines: each file's size, mode, modification and access
 * times, and whether its bytes are the ones written (tests/unpack_test.go). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char data[4096];

static int size_of(int i) { return 1 + (i * 997) % (int)sizeof(data); }

static void fill(int i) {
	for (int k = 0; k < (int)sizeof(data); k++)
		data[k] = (char)('a' + (i + k) % 26);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: unpack DIR N\n");
		return 2;
	}
	const char *dir = argv[1];
	int n = atoi(argv[2]);
	char p[512], q[520];
	struct timespec ts[2] = {{1600000000, 0}, {1700000000, 500}};
	if (mkdir(dir, 0755) != 0) {
		perror("mkdir");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		snprintf(q, sizeof q, "%s/f%d.dpkg-new", dir, i);
		int fd = open(q, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
		fill(i);
		if (fd < 0 || write(fd, data, size_of(i)) != size_of(i)) {
			perror(q);
			return 1;
		}
		if (sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) != 0 || fchown(fd, getuid(), getgid()) != 0 ||
		    fchmod(fd, 0644 | (i % 2 ? 0100 : 0)) != 0 || utimensat(AT_FDCWD, q, ts, AT_SYMLINK_NOFOLLOW) != 0) {
			perror(q);
			return 1;
		}
		close(fd);
	}
	for (int i = 0; i < n; i++) {
		snprintf(q, sizeof q, "%s/f%d.dpkg-new", dir, i);
		snprintf(p, sizeof p, "%s/f%d", dir, i);
		int fd = open(q, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || fsync(fd) != 0 || close(fd) != 0 || rename(q, p) != 0) {
			perror(q);
			return 1;
		}
	}
	for (int i = 0; i < n; i++) {
		struct stat st;
		char got[sizeof(data)];
		snprintf(p, sizeof p, "%s/f%d", dir, i);
		if (lstat(p, &st) != 0) {
			perror(p);
			return 1;
		}
		printf("f%d size %lld mode %o mtime %lld.%09ld atime %lld.%09ld", i, (long long)st.st_size, st.st_mode & 07777,
		       (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		fill(i);
		printf(" bytes %s\n", fd >= 0 && read(fd, got, sizeof got) == size_of(i) && memcmp(got, data, size_of(i)) == 0 ? "ok" : "differ");
		close(fd);
	}
	return 0;
}
