/*
 * warmexec [-s DIR]... [-r PATH]... -- PROG ARGS...: warm the caches a
 * command will use, then exec it in the same process, for the in-process
 * tiers' warm workload rows (tests/bench_workloads_test.go), which cannot
 * fork to run a command twice.
 *   -s DIR  walks DIR, stat of every entry (no symlink followed);
 *   -r PATH reads PATH whole, or every regular file under it.
 * Just before the exec it writes CLOCK_MONOTONIC in nanoseconds and a
 * newline to stdout, then points stdout and stderr at /dev/null: the
 * caller times the command from that stamp to the process's end.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

static void readfile(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	while (read(fd, buf, sizeof buf) > 0)
		;
	close(fd);
}

/* walk stats every entry under path; with reads, it reads regular files. */
static void walk(int dfd, const char *path, int reads)
{
	struct stat st;
	if (fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (S_ISREG(st.st_mode) && reads) {
		readfile(dfd, path);
		return;
	}
	if (!S_ISDIR(st.st_mode))
		return;
	int fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		walk(fd, e->d_name, reads);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	int i = 1;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (i + 1 >= argc || (strcmp(argv[i], "-s") && strcmp(argv[i], "-r"))) {
			fprintf(stderr, "usage: warmexec [-s DIR]... [-r PATH]... -- PROG ARGS...\n");
			return 2;
		}
		walk(AT_FDCWD, argv[i + 1], argv[i][1] == 'r');
		i++;
	}
	if (i >= argc) {
		fprintf(stderr, "warmexec: no program\n");
		return 2;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	fflush(stdout);
	int null = open("/dev/null", O_WRONLY);
	if (null >= 0) {
		dup2(null, 1);
		dup2(null, 2);
		close(null);
	}
	execv(argv[i], argv + i);
	return 127;
}
