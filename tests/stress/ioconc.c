/* ioconc: concurrent I/O on one image file from many processes.
 * ioconc FILE PROCS RECORDS: PROCS children each pwrite RECORDS 64-byte
 * records into their own slots of FILE and append RECORDS lines to
 * FILE.log with O_APPEND, fsyncing now and then; the parent then checks
 * every record and counts every line. Prints "ioconc ok P*R" or the first
 * difference, and exits 1 on any. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define REC 64

static void record(char *b, long p, long r)
{
	memset(b, 'a' + (int)((p * 7 + r) % 26), REC);
	snprintf(b, REC, "p%05ld r%06ld ", p, r);
	b[strlen(b)] = '.';
	b[REC - 1] = '\n';
}

static int child(const char *path, const char *log, long p, long procs, long recs)
{
	int fd = open(path, O_WRONLY);
	int lf = open(log, O_WRONLY | O_APPEND);
	char b[REC], line[48];
	if (fd < 0 || lf < 0) {
		perror("open");
		return 1;
	}
	for (long r = 0; r < recs; r++) {
		record(b, p, r);
		/* interleave the processes' slots: record r of process p */
		if (pwrite(fd, b, REC, (off_t)(r * procs + p) * REC) != REC) {
			perror("pwrite");
			return 1;
		}
		int n = snprintf(line, sizeof line, "p%05ld r%06ld\n", p, r);
		if (write(lf, line, n) != n) {
			perror("append");
			return 1;
		}
		if (r % 64 == 63 && fsync(fd) != 0) {
			perror("fsync");
			return 1;
		}
	}
	return close(fd) || close(lf);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: ioconc FILE PROCS RECORDS\n");
		return 2;
	}
	const char *path = argv[1];
	long procs = strtol(argv[2], NULL, 10), recs = strtol(argv[3], NULL, 10);
	char log[4096];
	snprintf(log, sizeof log, "%s.log", path);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	int lf = open(log, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || lf < 0 || procs <= 0 || recs <= 0) {
		perror("ioconc");
		return 2;
	}
	for (long p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(child(path, log, p, procs, recs));
	}
	int bad = 0, st;
	while (wait(&st) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	if (bad) {
		printf("ioconc FAIL: %d writers failed\n", bad);
		return 1;
	}
	char want[REC], got[REC];
	for (long r = 0; r < recs; r++)
		for (long p = 0; p < procs; p++) {
			record(want, p, r);
			if (pread(fd, got, REC, (off_t)(r * procs + p) * REC) != REC || memcmp(want, got, REC)) {
				printf("ioconc FAIL: record %ld of process %ld differs\n", r, p);
				return 1;
			}
		}
	long lines = 0, per[4096] = {0};
	FILE *f = fdopen(lf, "r");
	char l[64];
	while (fgets(l, sizeof l, f)) {
		long p, r;
		if (sscanf(l, "p%ld r%ld", &p, &r) != 2 || p < 0 || p >= procs || p >= 4096 || r != per[p]) {
			printf("ioconc FAIL: log line %ld is %s", lines, l);
			return 1;
		}
		per[p]++;
		lines++;
	}
	if (lines != procs * recs) {
		printf("ioconc FAIL: %ld log lines, want %ld\n", lines, procs * recs);
		return 1;
	}
	printf("ioconc ok %ld\n", lines);
	return 0;
}
