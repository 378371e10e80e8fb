/* shmsem: POSIX shared memory and a named semaphore between two guest
 * processes, as multiprocessing and PostgreSQL's POSIX mode use them.
 * "shmsem NAME" makes the semaphore /NAME.sem (sem_open, a file in
 * /dev/shm: musl names it so, glibc sem.NAME.sem) and the shared memory
 * object /NAME (shm_open, ftruncate, mmap MAP_SHARED), then
 * forks: the child writes a message into the mapping and posts; the parent
 * waits (10 s at most), prints "parent read: MESSAGE", changes the
 * object's mode with fchmod and chmod, checks both with stat (by path:
 * musl's fstat of a shadow is the host's), removes
 * both names, and prints "shmsem ok" when all of it held. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: shmsem NAME\n");
		return 2;
	}
	char name[256], sname[300], path[300];
	snprintf(name, sizeof name, "/%s", argv[1]);
	snprintf(sname, sizeof sname, "/%s.sem", argv[1]);
	snprintf(path, sizeof path, "/dev/shm/%s", argv[1]);
	sem_t *sem = sem_open(sname, O_CREAT | O_EXCL, 0600, 0);
	if (sem == SEM_FAILED) {
		printf("shmsem FAIL: sem_open: %s\n", strerror(errno));
		return 1;
	}
	int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0) {
		printf("shmsem FAIL: shm_open: %s\n", strerror(errno));
		return 1;
	}
	CHECK(ftruncate(fd, 4096) == 0, "ftruncate");
	char *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		printf("shmsem FAIL: mmap: %s\n", strerror(errno));
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		snprintf(map, 4096, "hello from %d", (int)getpid());
		_exit(sem_post(sem) == 0 ? 0 : 1);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	int w;
	while ((w = sem_timedwait(sem, &ts)) < 0 && errno == EINTR)
		;
	CHECK(w == 0, "sem_timedwait");
	char want[64];
	snprintf(want, sizeof want, "hello from %d", (int)pid);
	printf("parent read: %.64s\n", map);
	CHECK(strcmp(map, want) == 0, "the mapping holds \"%.64s\", not \"%s\"", map, want);
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	struct stat st;
	CHECK(fchmod(fd, 0640) == 0, "fchmod");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0640, "mode after fchmod %o", st.st_mode & 07777);
	CHECK(chmod(path, 0604) == 0, "chmod");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0604, "mode after chmod %o", st.st_mode & 07777);
	CHECK(shm_unlink(name) == 0, "shm_unlink");
	CHECK(sem_unlink(sname) == 0, "sem_unlink");
	CHECK(access(path, F_OK) != 0 && errno == ENOENT, "%s still there", path);
	if (!bad)
		printf("shmsem ok\n");
	return bad;
}
