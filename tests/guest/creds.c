/*
 * creds: credentials and the permission checks that follow them.
 *
 *   creds drop FILE DIR TMP   become nobody (setgroups, setresgid, setresuid),
 *                             then report ids and what nobody may do with a
 *                             root-owned 0644 FILE, a root 0700 DIR and a
 *                             1777 TMP directory
 *   creds saved DIR           keep uid 0 only as the saved uid, then get it
 *                             back with seteuid(0)
 *   creds real FILE           real uid nobody, effective root: access(2)
 *                             checks the real ids, AT_EACCESS the effective
 *   creds caps                capget of the process itself
 *   creds orphan DIR          nobody forks a child that forks a grandchild;
 *                             the child exits (exit_group) before the
 *                             grandchild's first system call: the
 *                             grandchild must still be nobody
 *   creds orphan-crash DIR    the same, but the child dies of SIGSEGV
 *   creds clone-parent        nobody (under a root parent) asks for
 *                             clone(CLONE_PARENT)
 *   creds forkdrop DIR        fork, then become nobody: the child, whose first
 *                             system call comes later, is still root
 *   creds tidreuse NS_LAST_PID
 *                             a root helper's thread makes a system call and
 *                             exits; nobody then forks until a child gets
 *                             that thread's id (through the host's
 *                             ns_last_pid, bound at NS_LAST_PID, so only as
 *                             root on the host): the child must be nobody,
 *                             not the helper's root
 *   creds pidreuse NS_LAST_PID
 *                             the same with a root helper process killed by
 *                             a signal (no exit_group kbox would see): a
 *                             child of nobody's that gets its id is nobody
 *   creds statmix DIR N       a root child and a nobody parent stat
 *                             DIR/creds-stat (DIR 0700) N times each at the
 *                             same time: nobody must never succeed
 *
 * Every line printed is the same natively (as root) and under kbox, except
 * for caps (the host's bounding set) and the clone/orphan modes, which
 * show kbox's own rules.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <pthread.h>
#include <sys/fsuid.h>
#include <unistd.h>
#include "check.h"

/* linux/capability.h, which musl does not ship */
#define CAP_VERSION_3 0x20080522
struct cap_header {
	unsigned int version;
	int pid;
};
struct cap_data {
	unsigned int effective, permitted, inheritable;
};

#define NOBODY 65534

/* en is the outcome of a call that returned r: "0" or its errno's name. */
static const char *en(int r) { return errname(r >= 0 ? 0 : errno); }

static void ids(void)
{
	uid_t r, e, s;
	gid_t gr, ge, gs, g[64];
	int n, i;

	getresuid(&r, &e, &s);
	getresgid(&gr, &ge, &gs);
	printf("res uid %u %u %u getuid %u geteuid %u\n", r, e, s, getuid(), geteuid());
	printf("res gid %u %u %u getgid %u getegid %u\n", gr, ge, gs, getgid(), getegid());
	n = getgroups(64, g);
	printf("groups %d:", n);
	for (i = 0; i < n; i++)
		printf(" %u", g[i]);
	printf("\n");
}

static void caps(void)
{
	struct cap_header h = { CAP_VERSION_3, 0 };
	struct cap_data d[2];

	if (syscall(SYS_capget, &h, d) < 0) {
		printf("capget %s\n", en(-1));
		return;
	}
	printf("cap eff %#llx perm %#llx inh %#llx\n",
	       (unsigned long long)d[1].effective << 32 | d[0].effective,
	       (unsigned long long)d[1].permitted << 32 | d[0].permitted,
	       (unsigned long long)d[1].inheritable << 32 | d[0].inheritable);
}

static int become_nobody(void)
{
	gid_t g = NOBODY;

	if (setgroups(1, &g) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) < 0) {
		printf("become nobody: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* create makes DIR/name and reports the errno, removing it again. */
static void create(const char *what, const char *dir, const char *name)
{
	char p[4096];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	printf("%s: %s\n", what, en(fd));
	if (fd >= 0) {
		close(fd);
		unlink(p);
	}
}

static int drop(const char *file, const char *dir, const char *tmp)
{
	char p[4096];
	struct stat st;
	int fd;

	if (become_nobody() < 0)
		return 1;
	ids();
	fd = open(file, O_WRONLY);
	printf("write root file: %s\n", en(fd));
	fd = open(file, O_RDONLY);
	printf("read root file: %s\n", en(fd));
	if (fd >= 0)
		close(fd);
	create("create in root dir", dir, "creds-nobody");
	snprintf(p, sizeof(p), "%s/creds-nobody-%d", tmp, (int)getpid());
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	printf("create in tmp: %s\n", en(fd));
	if (fd >= 0) {
		/* by path: musl's fstat of a shadow sees kbox's memfd */
		stat(p, &st);
		printf("tmp file owner by path %u:%u\n", st.st_uid, st.st_gid);
		close(fd);
		unlink(p);
	}
	printf("access W_OK: %s\n", en(access(file, W_OK)));
	printf("access R_OK: %s\n", en(access(file, R_OK)));
	printf("setuid(0): %s\n", en(setuid(0)));
	printf("seteuid(0): %s\n", en(seteuid(0)));
	printf("setgid(0): %s\n", en(setgid(0)));
	{
		gid_t g = 0;
		printf("setgroups([0]): %s\n", en(setgroups(1, &g)));
	}
	printf("setfsuid(0) returns %d\n", setfsuid(0));
	printf("setfsuid(-1) returns %d\n", setfsuid(-1));
	caps();
	return 0;
}

static int saved(const char *dir)
{
	setgroups(0, NULL); /* the same groups natively and in a guest */
	printf("setresuid(-1, 65534, 0): %s\n", en(setresuid(-1, NOBODY, 0)));
	printf("setresuid(65534, -1, -1): %s\n", en(setresuid(NOBODY, -1, -1)));
	ids();
	create("create in root dir", dir, "creds-saved");
	printf("setuid(0) as euid nobody: %s\n", en(setuid(0)));
	printf("seteuid(0): %s\n", en(seteuid(0)));
	ids();
	create("create in root dir", dir, "creds-saved");
	printf("setresuid(-1, -1, 65534) then seteuid(0): %s", en(setresuid(-1, NOBODY, NOBODY)));
	printf(" %s\n", en(seteuid(0)));
	ids();
	return 0;
}

static int real(const char *file)
{
	int fd;

	setgroups(0, NULL);
	printf("setresuid(65534, 0, 0): %s\n", en(setresuid(NOBODY, 0, 0)));
	fd = open(file, O_WRONLY);
	printf("open for writing (euid 0): %s\n", en(fd));
	if (fd >= 0)
		close(fd);
	printf("access W_OK (real uid): %s\n", en(access(file, W_OK)));
	printf("faccessat W_OK AT_EACCESS: %s\n", en(faccessat(AT_FDCWD, file, W_OK, AT_EACCESS)));
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };

	nanosleep(&ts, NULL);
}

/* orphan: the grandchild reports through a pipe; its only system calls
 * before the report are native (nanosleep) until its parent is gone. */
static int orphan(const char *dir, int crash)
{
	int pfd[2];
	char buf[256];
	ssize_t n;
	pid_t child;

	if (become_nobody() < 0)
		return 1;
	if (pipe(pfd) < 0)
		return 1;
	child = fork();
	if (child == 0) {
		pid_t gc = fork();

		if (gc == 0) {
			char p[4096];
			int fd;

			close(pfd[0]);
			sleep_ms(300); /* native: the parent is gone meanwhile */
			snprintf(p, sizeof(p), "%s/creds-orphan", dir);
			fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
			n = snprintf(buf, sizeof(buf), "orphan uid %u euid %u create in root dir: %s\n",
				     getuid(), geteuid(), en(fd));
			if (fd >= 0)
				unlink(p);
			write(pfd[1], buf, n);
			_exit(0);
		}
		if (crash)
			*(volatile int *)0 = 0;
		_exit(0);
	}
	close(pfd[1]);
	waitpid(child, NULL, 0);
	n = read(pfd[0], buf, sizeof(buf) - 1);
	if (n <= 0) {
		printf("orphan: no report (killed)\n");
		return 0;
	}
	buf[n] = 0;
	fputs(buf, stdout);
	return 0;
}

static int forkdrop(const char *dir)
{
	pid_t child = fork();

	if (child == 0) {
		sleep_ms(300); /* native: the parent changes ids meanwhile */
		printf("child uid %u euid %u\n", getuid(), geteuid());
		create("child create in root dir", dir, "creds-forkdrop");
		_exit(0);
	}
	if (become_nobody() < 0)
		return 1;
	printf("parent uid %u\n", getuid());
	waitpid(child, NULL, 0);
	return 0;
}

static void *thread_tid(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	getuid(); /* notified: kbox now knows this thread id */
	return NULL;
}

/* Attempts at getting a dead task's id again: another process on the
 * host may take it first. */
#define REUSE_TRIES 1000

static int tidreuse(const char *ns_last_pid)
{
	int pfd[2], ctl[2], i, status;
	pid_t helper, tid = 0;
	char c;

	if (pipe(pfd) < 0 || pipe(ctl) < 0)
		return 1;
	helper = fork();
	if (helper == 0) {
		pthread_t th;

		close(ctl[1]);
		getuid(); /* the helper is known to kbox, as root */
		pthread_create(&th, NULL, thread_tid, &tid);
		pthread_join(th, NULL);
		write(pfd[1], &tid, sizeof(tid));
		read(ctl[0], &c, 1); /* until the main process closes ctl */
		_exit(0);
	}
	close(ctl[0]);
	if (read(pfd[0], &tid, sizeof(tid)) != sizeof(tid))
		return 1;
	if (become_nobody() < 0)
		return 1;
	/* Opened once: between the write and the fork, only native calls,
	 * so that kbox's own work (a thread Go starts) takes no id there. */
	int fd = open(ns_last_pid, O_WRONLY);
	if (fd < 0)
		printf("tidreuse: ns_last_pid: %s\n", strerror(errno));
	for (i = 0; fd >= 0 && i < REUSE_TRIES; i++) {
		char buf[32];
		pid_t child;

		snprintf(buf, sizeof(buf), "%d", tid - 1);
		pwrite(fd, buf, strlen(buf), 0);
		child = fork();
		if (child == 0) {
			if (getpid() != tid)
				_exit(2);
			_exit(getuid() == 0 ? 0 : 1);
		}
		waitpid(child, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) != 2) {
			printf("child with the dead thread's id: uid %s\n", WEXITSTATUS(status) == 0 ? "0" : "65534");
			break;
		}
	}
	if (i == REUSE_TRIES)
		printf("tidreuse: the id never came back\n");
	if (fd >= 0)
		close(fd);
	close(ctl[1]);
	waitpid(helper, NULL, 0);
	return 0;
}

static int pidreuse(const char *ns_last_pid)
{
	int i, status;
	pid_t helper, child;

	helper = fork();
	if (helper == 0) {
		getuid(); /* the helper is known to kbox, as root */
		for (;;)
			pause();
	}
	usleep(100 * 1000);
	kill(helper, SIGKILL);
	waitpid(helper, NULL, 0);
	if (become_nobody() < 0)
		return 1;
	int fd = open(ns_last_pid, O_WRONLY); /* once, as tidreuse */
	if (fd < 0) {
		printf("pidreuse: ns_last_pid: %s\n", strerror(errno));
		return 0;
	}
	for (i = 0; i < REUSE_TRIES; i++) {
		char buf[32];

		snprintf(buf, sizeof(buf), "%d", helper - 1);
		pwrite(fd, buf, strlen(buf), 0);
		child = fork();
		if (child == 0) {
			if (getpid() != helper)
				_exit(2);
			_exit(getuid() == 0 ? 0 : 1);
		}
		waitpid(child, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) != 2) {
			printf("child with the killed process's id: uid %s\n", WEXITSTATUS(status) == 0 ? "0" : "65534");
			close(fd);
			return 0;
		}
	}
	close(fd);
	printf("pidreuse: the id never came back\n");
	return 0;
}

static int clone_parent(void)
{
	long r;

	if (become_nobody() < 0)
		return 1;
	r = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	printf("clone(CLONE_PARENT): %s\n", en(r));
	return 0;
}

static int statmix(const char *dir, int n)
{
	char p[4096];
	struct stat st;
	int fd, i, okc = 0, rootok = 0, status;
	pid_t child;

	snprintf(p, sizeof(p), "%s/creds-stat", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd < 0) {
		printf("create %s: %s\n", p, en(fd));
		return 1;
	}
	close(fd);
	child = fork();
	if (child == 0) {
		for (i = 0; i < n; i++)
			rootok += stat(p, &st) == 0;
		_exit(rootok == n ? 0 : 1);
	}
	if (become_nobody() < 0)
		return 1;
	for (i = 0; i < n; i++)
		okc += stat(p, &st) == 0;
	waitpid(child, &status, 0);
	printf("nobody stat succeeded %d of %d; root child %s\n", okc, n,
	       WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "all ok" : "failed");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 5 && strcmp(argv[1], "drop") == 0)
		return drop(argv[2], argv[3], argv[4]);
	if (argc == 3 && strcmp(argv[1], "saved") == 0)
		return saved(argv[2]);
	if (argc == 3 && strcmp(argv[1], "real") == 0)
		return real(argv[2]);
	if (argc == 2 && strcmp(argv[1], "caps") == 0) {
		ids();
		caps();
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "orphan") == 0)
		return orphan(argv[2], 0);
	if (argc == 3 && strcmp(argv[1], "orphan-crash") == 0)
		return orphan(argv[2], 1);
	if (argc == 3 && strcmp(argv[1], "forkdrop") == 0)
		return forkdrop(argv[2]);
	if (argc == 2 && strcmp(argv[1], "clone-parent") == 0)
		return clone_parent();
	if (argc == 3 && strcmp(argv[1], "tidreuse") == 0)
		return tidreuse(argv[2]);
	if (argc == 3 && strcmp(argv[1], "pidreuse") == 0)
		return pidreuse(argv[2]);
	if (argc == 4 && strcmp(argv[1], "statmix") == 0)
		return statmix(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: creds drop FILE DIR TMP | saved DIR | real FILE | caps | orphan DIR | orphan-crash DIR | forkdrop DIR | clone-parent | tidreuse NS_LAST_PID | pidreuse NS_LAST_PID | statmix DIR N\n");
	return 2;
}
