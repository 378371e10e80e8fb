/* sysvipc: System V IPC between guest processes, private to the kbox run.
 *
 *   sysvipc shm        a shared memory segment and a semaphore between two
 *                      processes: the child writes, posts; the parent waits,
 *                      reads
 *   sysvipc msg        a message queue between two processes
 *   sysvipc mq         a POSIX message queue between two processes
 *   sysvipc probe ID   shmctl(IPC_STAT) and shmat of segment ID (a host
 *                      segment's id: both must fail)
 *
 * Each prints what it saw and "... ok" when all hold. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static int shm(void)
{
	int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
	if (id < 0) {
		printf("shmget %s\n", strerror(errno));
		return 1;
	}
	int sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	CHECK(sem >= 0, "semget");
	pid_t pid = fork();
	if (pid == 0) {
		char *p = shmat(id, NULL, 0);
		CHECK(p != (void *)-1, "child shmat");
		strcpy(p, "written by the child");
		struct sembuf post = { 0, 1, 0 };
		CHECK(semop(sem, &post, 1) == 0, "semop post");
		shmdt(p);
		_exit(bad);
	}
	char *p = shmat(id, NULL, 0);
	CHECK(p != (void *)-1, "parent shmat");
	struct sembuf wait = { 0, -1, 0 };
	CHECK(semop(sem, &wait, 1) == 0, "semop wait");
	printf("parent reads: %s\n", p);
	struct shmid_ds ds;
	CHECK(shmctl(id, IPC_STAT, &ds) == 0, "IPC_STAT");
	printf("segment size %zu\n", (size_t)ds.shm_segsz);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
	shmdt(p);
	CHECK(shmctl(id, IPC_RMID, NULL) == 0, "IPC_RMID");
	CHECK(semctl(sem, 0, IPC_RMID) == 0, "sem IPC_RMID");
	printf("shm %s\n", bad ? "FAILED" : "ok");
	return bad;
}

struct msg {
	long type;
	char text[32];
};

static int msg(void)
{
	int q = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
	if (q < 0) {
		printf("msgget %s\n", strerror(errno));
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		struct msg m = { 7, "queued by the child" };
		CHECK(msgsnd(q, &m, sizeof(m.text), 0) == 0, "msgsnd");
		_exit(bad);
	}
	struct msg m;
	CHECK(msgrcv(q, &m, sizeof(m.text), 7, 0) >= 0, "msgrcv");
	printf("parent received: %s\n", m.text);
	int st;
	waitpid(pid, &st, 0);
	CHECK(msgctl(q, IPC_RMID, NULL) == 0, "msg IPC_RMID");
	printf("msg %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int mq(void)
{
	struct mq_attr attr = { .mq_maxmsg = 4, .mq_msgsize = 32 };
	mqd_t q = mq_open("/kbox-test-mq", O_CREAT | O_RDWR, 0600, &attr);
	if (q == (mqd_t)-1) {
		printf("mq_open %s\n", strerror(errno));
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		CHECK(mq_send(q, "posted by the child", 20, 1) == 0, "mq_send");
		_exit(bad);
	}
	char buf[32];
	CHECK(mq_receive(q, buf, sizeof(buf), NULL) == 20, "mq_receive");
	printf("parent received: %s\n", buf);
	int st;
	waitpid(pid, &st, 0);
	CHECK(mq_unlink("/kbox-test-mq") == 0, "mq_unlink");
	printf("mq %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int probe(int id)
{
	struct shmid_ds ds;
	errno = 0;
	int rc = shmctl(id, IPC_STAT, &ds);
	printf("IPC_STAT of %d: %d %s\n", id, rc, rc == 0 ? "visible" : strerror(errno));
	errno = 0;
	void *p = shmat(id, NULL, SHM_RDONLY);
	printf("shmat of %d: %s\n", id, p == (void *)-1 ? strerror(errno) : "attached");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && strcmp(argv[1], "shm") == 0)
		return shm();
	if (argc >= 2 && strcmp(argv[1], "msg") == 0)
		return msg();
	if (argc >= 2 && strcmp(argv[1], "mq") == 0)
		return mq();
	if (argc >= 3 && strcmp(argv[1], "probe") == 0)
		return probe(atoi(argv[2]));
	fprintf(stderr, "usage: sysvipc shm|msg|mq|probe ID\n");
	return 2;
}
