/* ipcperm: System V IPC permission checks by the caller's credentials, as
 * Linux makes them (ipcperms, ipcctl_obtain_check; LTP msgget02, msgctl04,
 * semctl04, shmat02, shmctl02 and the others).
 *
 * Run as root. Root makes queues, semaphore sets and segments with given
 * modes; children drop to other users and groups (setresgid, setgroups,
 * setresuid) and try them. One line per call: "what: ok" or "what: ERRNO",
 * and what IPC_STAT shows; the same lines natively and under kbox. Every
 * object is removed at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipcusers.h"

struct msgbuf1 {
	long mtype;
	char text[8];
};

static void *const badbuf = (void *)-1;

static void show_msg(const char *who, int id)
{
	struct msqid_ds ds;
	if (msgctl(id, IPC_STAT, &ds) != 0) {
		printf("%s stat: %s\n", who, errname(errno));
		return;
	}
	printf("%s stat: uid %u gid %u cuid %u cgid %u mode %03o\n", who, ds.msg_perm.uid, ds.msg_perm.gid,
	       ds.msg_perm.cuid, ds.msg_perm.cgid, ds.msg_perm.mode & 0777);
}

/* sysctl reads /proc/sys/kernel/NAME as a number (-1 if it cannot). */
static long sysctl(const char *name)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	return readnum(path);
}

static int write_sysctl(const char *name, long v)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	return writenum(path, v);
}

/* limits: the IPC namespace's files of /proc/sys/kernel say what IPC_INFO
 * says, and root changes them. */
static void limits(void)
{
	struct msginfo mi;
	struct shminfo si;
	REQUIRE(msgctl(0, IPC_INFO, (struct msqid_ds *)&mi) >= 0, "msgctl IPC_INFO");
	REQUIRE(shmctl(0, IPC_INFO, (struct shmid_ds *)&si) >= 0, "shmctl IPC_INFO");
	printf("msgmnb file is IPC_INFO's: %s\n", sysctl("msgmnb") == mi.msgmnb ? "yes" : "no");
	printf("msgmni file is IPC_INFO's: %s\n", sysctl("msgmni") == mi.msgmni ? "yes" : "no");
	printf("shmmni file is IPC_INFO's: %s\n", sysctl("shmmni") == (long)si.shmmni ? "yes" : "no");
	printf("shmmax file is IPC_INFO's: %s\n", sysctl("shmmax") == (long)si.shmmax ? "yes" : "no");
	R("root writes msgmnb 12345", write_sysctl("msgmnb", 12345));
	REQUIRE(msgctl(0, IPC_INFO, (struct msqid_ds *)&mi) >= 0, "msgctl IPC_INFO");
	printf("IPC_INFO's msgmnb after: %d, file %ld\n", mi.msgmnb, sysctl("msgmnb"));
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0); /* nothing buffered is copied by fork */
	int q = msgget(IPC_PRIVATE, 0600), s = semget(IPC_PRIVATE, 2, 0600), m = shmget(IPC_PRIVATE, 4096, 0600);
	REQUIRE(q >= 0 && s >= 0 && m >= 0, "root's objects");
	int qg = msgget(IPC_PRIVATE, 0600), qn = msgget(IPC_PRIVATE, 0600);
	REQUIRE(qg >= 0 && qn >= 0, "root's queues");
	key_t key = (key_t)(0x4b000000 | (getpid() & 0xffffff));
	int qk = msgget(key, IPC_CREAT | IPC_EXCL | 0600);
	REQUIRE(qk >= 0, "keyed queue");

	/* The group's queue: group GROUP may read and write, nobody else. */
	struct msqid_ds ds;
	REQUIRE(msgctl(qg, IPC_STAT, &ds) == 0, "stat");
	ds.msg_perm.gid = GROUP;
	ds.msg_perm.mode = 0060;
	R("root sets group queue to group 4321 mode 060", msgctl(qg, IPC_SET, &ds));
	show_msg("group queue", qg);
	/* The given-away queue: owner nobody, creator root. */
	REQUIRE(msgctl(qn, IPC_STAT, &ds) == 0, "stat");
	ds.msg_perm.uid = NOBODY;
	R("root gives queue to nobody", msgctl(qn, IPC_SET, &ds));
	show_msg("given queue", qn);

	struct shmid_ds sds;
	REQUIRE(shmctl(m, IPC_STAT, &sds) == 0, "shm stat");
	printf("segment creator is the caller: %s\n", sds.shm_cpid == getpid() ? "yes" : "no");
	printf("segment stat: uid %u cuid %u mode %03o\n", sds.shm_perm.uid, sds.shm_perm.cuid, sds.shm_perm.mode & 0777);

	limits();
	int *own = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(own != MAP_FAILED, "mmap");
	*own = -1;
	pid_t pid = fork();
	if (pid == 0) {
		become(NOBODY, NOBODY, 0, NULL);
		struct msgbuf1 mb = { 1, "hi" }, m0 = { 0, "hi" };
		struct msqid_ds d;
		struct semid_ds sd;
		struct shmid_ds shd;
		struct sembuf up = { 0, 1, 0 }, look = { 0, 0, IPC_NOWAIT }, far = { 5, 1, 0 };
		union semun {
			int val;
			struct semid_ds *buf;
		} arg;

		R("nobody writes msgmnb", write_sysctl("msgmnb", 100));
		/* Root's 0600 objects. */
		R("nobody msgsnd root 600", msgsnd(q, &mb, 2, IPC_NOWAIT));
		R("nobody msgsnd root 600 type 0", msgsnd(q, &m0, 2, IPC_NOWAIT));
		R("nobody msgrcv root 600", msgrcv(q, &mb, 8, 0, IPC_NOWAIT));
		R("nobody msgctl IPC_STAT root 600", msgctl(q, IPC_STAT, &d));
		R("nobody msgctl IPC_STAT root 600 bad buffer", msgctl(q, IPC_STAT, badbuf));
		R("nobody msgctl MSG_STAT_ANY root 600", msgctl(q & 0x7fff, MSG_STAT_ANY, &d) == q ? 0 : -1);
		R("nobody msgctl MSG_STAT root 600", msgctl(q & 0x7fff, MSG_STAT, &d));
		R("nobody msgctl IPC_SET root 600", msgctl(q, IPC_SET, &d));
		R("nobody msgctl IPC_RMID root 600", msgctl(q, IPC_RMID, NULL));
		R("nobody msgget root key 600", msgget(key, 0600));
		R("nobody msgget root key 400", msgget(key, 0400));
		R("nobody msgget root key 0", msgget(key, 0));
		R("nobody msgget root key excl", msgget(key, IPC_CREAT | IPC_EXCL | 0600));
		R("nobody semop root 600", semop(s, &up, 1));
		R("nobody semop root 600 wait zero", semop(s, &look, 1));
		R("nobody semop root 600 beyond the set", semop(s, &far, 1));
		arg.buf = &sd;
		R("nobody semctl IPC_STAT root 600", semctl(s, 0, IPC_STAT, arg));
		R("nobody semctl GETVAL root 600", semctl(s, 0, GETVAL));
		arg.val = 3;
		R("nobody semctl SETVAL root 600", semctl(s, 0, SETVAL, arg));
		R("nobody semctl SETVAL root 600 beyond the set", semctl(s, 7, SETVAL, arg));
		R("nobody semctl IPC_RMID root 600", semctl(s, 0, IPC_RMID));
		R("nobody shmat root 600", shmat(m, NULL, 0));
		R("nobody shmat root 600 read-only", shmat(m, NULL, SHM_RDONLY));
		R("nobody shmat root 600 misaligned", shmat(m, (void *)0x10001, 0));
		R("nobody shmctl IPC_STAT root 600", shmctl(m, IPC_STAT, &shd));
		R("nobody shmctl SHM_LOCK root 600", shmctl(m, SHM_LOCK, NULL));
		R("nobody shmctl IPC_RMID root 600", shmctl(m, IPC_RMID, NULL));
		/* The queue root gave to nobody. */
		R("nobody msgsnd given queue", msgsnd(qn, &mb, 2, IPC_NOWAIT));
		R("nobody msgrcv given queue", msgrcv(qn, &mb, 8, 0, IPC_NOWAIT));
		/* Its own queue. */
		int mine = msgget(IPC_PRIVATE, 0600);
		R("nobody makes a queue", mine);
		*own = mine;
		show_msg("nobody's queue", mine);
		R("nobody msgsnd own queue", msgsnd(mine, &mb, 2, IPC_NOWAIT));
		REQUIRE(msgctl(mine, IPC_STAT, &d) == 0, "stat");
		d.msg_qbytes += 1;
		R("nobody raises own queue beyond msgmnb", msgctl(mine, IPC_SET, &d));
		d.msg_qbytes -= 2;
		d.msg_perm.mode = 0200;
		R("nobody lowers own queue, mode 200", msgctl(mine, IPC_SET, &d));
		R("nobody msgrcv own queue, mode 200", msgrcv(mine, &mb, 8, 0, IPC_NOWAIT));
		R("nobody msgsnd own queue, mode 200", msgsnd(mine, &mb, 2, IPC_NOWAIT));
		d.msg_perm.uid = (uid_t)-1;
		R("nobody sets own queue's owner to -1", msgctl(mine, IPC_SET, &d));
		d.msg_perm.uid = USER;
		d.msg_perm.mode = 0;
		R("nobody gives own queue to 1000, mode 0", msgctl(mine, IPC_SET, &d));
		show_msg("nobody's given queue", mine);
		exit(bad);
	}
	wait_child(pid);

	/* The group's queue, by a member and by others. */
	gid_t grp = GROUP;
	struct {
		const char *who;
		uid_t uid;
		gid_t gid;
		int ngroups;
	} users[] = {
		{ "user of group 4321", USER, GROUP, 0 },
		{ "user with group 4321 among its groups", USER, USER, 1 },
		{ "user not of group 4321", USER, USER, 0 },
	};
	for (unsigned i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
		pid = fork();
		if (pid == 0) {
			become(users[i].uid, users[i].gid, users[i].ngroups, &grp);
			struct msgbuf1 mb = { 1, "hi" };
			char what[128];
			snprintf(what, sizeof(what), "%s msgsnd group queue", users[i].who);
			R(what, msgsnd(qg, &mb, 2, IPC_NOWAIT));
			snprintf(what, sizeof(what), "%s msgrcv group queue", users[i].who);
			R(what, msgrcv(qg, &mb, 8, 0, IPC_NOWAIT));
			exit(bad);
		}
		wait_child(pid);
	}

	/* Root passes every mode (CAP_IPC_OWNER). */
	struct msgbuf1 mb = { 1, "hi" };
	R("root msgsnd group queue mode 060", msgsnd(qg, &mb, 2, IPC_NOWAIT));
	show_msg("root sees nobody's given queue", *own);
	R("root msgctl IPC_RMID nobody's queue", msgctl(*own, IPC_RMID, NULL));
	R("root msgctl IPC_RMID", msgctl(q, IPC_RMID, NULL));
	R("root msgctl IPC_RMID given queue", msgctl(qn, IPC_RMID, NULL));
	R("root msgctl IPC_RMID group queue", msgctl(qg, IPC_RMID, NULL));
	R("root msgctl IPC_RMID keyed queue", msgctl(qk, IPC_RMID, NULL));
	R("root semctl IPC_RMID", semctl(s, 0, IPC_RMID));
	R("root shmctl IPC_RMID", shmctl(m, IPC_RMID, NULL));
	printf("ipcperm done\n");
	return bad;
}
