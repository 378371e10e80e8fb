/* mqperm: POSIX message queue permission checks by the caller's
 * credentials, as Linux makes them on the queue's inode (LTP mq_unlink01,
 * mq_open01).
 *
 * Run as root. Root and children that dropped to other users make queues
 * with given modes and umasks; others open and remove them. One line per
 * call: "what: ok" or "what: ERRNO"; the same lines natively (in an IPC
 * namespace of its own) and under kbox. Every queue is removed at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipcusers.h"

/* as runs f in a child with uid, gid and one supplementary group (or
 * none when group is 0). */
static void as(uid_t uid, gid_t gid, gid_t group, void (*f)(void))
{
	fflush(stdout);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		gid_t g[1] = { group };
		become(uid, gid, group ? 1 : 0, g);
		f();
		fflush(stdout);
		_exit(bad);
	}
	wait_child(pid);
}

static void nobody_tries_roots(void)
{
	R("nobody open root 644 read", mq_open("/mq_root", O_RDONLY));
	R("nobody open root 644 write", mq_open("/mq_root", O_WRONLY));
	R("nobody open root 644 read-write", mq_open("/mq_root", O_RDWR));
	R("nobody open root 644 O_CREAT read-write", mq_open("/mq_root", O_CREAT | O_RDWR, 0666, NULL));
	R("nobody open root 644 O_CREAT|O_EXCL", mq_open("/mq_root", O_CREAT | O_EXCL | O_RDWR, 0666, NULL));
	R("nobody open root 600 read", mq_open("/mq_root600", O_RDONLY));
	R("nobody unlink root 644", mq_unlink("/mq_root"));
	R("nobody unlink root 666", mq_unlink("/mq_root666"));
	/* What nobody may read it reads. */
	mqd_t q = mq_open("/mq_root", O_RDONLY | O_NONBLOCK);
	char buf[8192];
	unsigned prio = 0;
	ssize_t n = q == (mqd_t)-1 ? -1 : mq_receive(q, buf, sizeof(buf), &prio);
	printf("nobody receives root's message: %s %.*s prio %u\n", n < 0 ? errname(errno) : "ok", n < 0 ? 0 : (int)n, buf, prio);
	if (q != (mqd_t)-1)
		mq_close(q);
	/* nobody's own queue. */
	umask(077);
	R("nobody open own O_CREAT 666 umask 077", mq_open("/mq_nobody", O_CREAT | O_EXCL | O_RDWR, 0666, NULL));
	R("nobody open own read-write", mq_open("/mq_nobody", O_RDWR));
}

static void user_tries_nobodys(void)
{
	R("user open nobody 600 read", mq_open("/mq_nobody", O_RDONLY));
	R("user unlink nobody 600", mq_unlink("/mq_nobody"));
	R("user open group 060 read-write", mq_open("/mq_group", O_RDWR));
}

static void group_member_tries(void)
{
	R("user of group 4321 open group 060 read-write", mq_open("/mq_group", O_RDWR));
	R("user of group 4321 unlink group 060", mq_unlink("/mq_group"));
}

static void nobody_removes_own(void)
{
	R("nobody unlink own", mq_unlink("/mq_nobody"));
	R("nobody unlink own again", mq_unlink("/mq_nobody"));
}

int main(void)
{
	REQUIRE(geteuid() == 0, "run as root");
	const char *names[] = { "/mq_root", "/mq_root600", "/mq_root666", "/mq_nobody", "/mq_group", "/mq_attr" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		mq_unlink(names[i]);

	umask(022);
	R("root open O_CREAT 666 umask 022", mq_open("/mq_root", O_CREAT | O_EXCL | O_RDWR, 0666, NULL));
	R("root open O_CREAT 600", mq_open("/mq_root600", O_CREAT | O_EXCL | O_RDWR, 0600, NULL));
	umask(0);
	R("root open O_CREAT 666 umask 0", mq_open("/mq_root666", O_CREAT | O_EXCL | O_RDWR, 0666, NULL));
	mqd_t q = mq_open("/mq_root", O_WRONLY);
	R("root send", q == (mqd_t)-1 ? -1 : mq_send(q, "hello", 5, 3));
	if (q != (mqd_t)-1)
		mq_close(q);
	REQUIRE(setresgid(GROUP, GROUP, 0) == 0, "setresgid");
	R("root open O_CREAT 060 as group 4321", mq_open("/mq_group", O_CREAT | O_EXCL | O_RDWR, 060, NULL));
	REQUIRE(setresgid(0, 0, 0) == 0, "setresgid back");

	as(NOBODY, NOBODY, 0, nobody_tries_roots);
	as(USER, USER, 0, user_tries_nobodys);
	as(USER, USER, GROUP, group_member_tries);
	R("root open nobody 600 read-write", mq_open("/mq_nobody", O_RDWR));
	as(NOBODY, NOBODY, 0, nobody_removes_own);

	/* Linux's own errors, whoever asks. */
	R("open O_WRONLY|O_RDWR", mq_open("/mq_root", O_WRONLY | O_RDWR));
	R("open O_CREAT|O_EXCL|O_WRONLY|O_RDWR of an existing queue", mq_open("/mq_root", O_CREAT | O_EXCL | O_WRONLY | O_RDWR, 0600, NULL));
	R("open a name with a slash", mq_open("/mq/x", O_CREAT | O_RDWR, 0600, NULL));
	R("open the empty name", mq_open("/", O_RDONLY));
	char longname[300];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[0] = '/';
	longname[sizeof(longname) - 1] = 0;
	R("open a name of 299 bytes", mq_open(longname, O_CREAT | O_RDWR, 0600, NULL));
	R("open missing", mq_open("/mq_missing", O_RDONLY));
	R("unlink missing", mq_unlink("/mq_missing"));
	R("open O_CREAT unreadable attr", mq_open("/mq_attr", O_CREAT | O_RDWR, 0600, (struct mq_attr *)8));
	R("open unreadable attr, no O_CREAT", syscall(SYS_mq_open, "mq_root", O_RDONLY, 0, 8));
	struct mq_attr a = { .mq_maxmsg = 0, .mq_msgsize = 16 };
	R("open O_CREAT maxmsg 0", mq_open("/mq_attr", O_CREAT | O_RDWR, 0600, &a));
	a.mq_maxmsg = 4;
	q = mq_open("/mq_attr", O_CREAT | O_EXCL | O_RDWR | O_NONBLOCK, 0600, &a);
	struct mq_attr got;
	if (q != (mqd_t)-1 && mq_getattr(q, &got) == 0)
		printf("attr: maxmsg %ld msgsize %ld flags %s\n", got.mq_maxmsg, got.mq_msgsize, got.mq_flags & O_NONBLOCK ? "O_NONBLOCK" : "0");
	else
		printf("attr: %s\n", errname(errno));
	if (q != (mqd_t)-1) {
		int fl = fcntl(q, F_GETFD);
		printf("close-on-exec without O_CLOEXEC: %s\n", fl & FD_CLOEXEC ? "yes" : "no");
		mq_close(q);
	}
	q = mq_open("/mq_attr", O_RDONLY | O_CLOEXEC);
	if (q != (mqd_t)-1) {
		printf("close-on-exec with O_CLOEXEC: %s\n", fcntl(q, F_GETFD) & FD_CLOEXEC ? "yes" : "no");
		mq_close(q);
	}

	/* The namespace's limits: read, and written by root. */
	printf("queues_max file: %ld\n", readnum("/proc/sys/fs/mqueue/queues_max"));
	R("root writes msg_default 7", writenum("/proc/sys/fs/mqueue/msg_default", 7));
	printf("msg_default after: %ld\n", readnum("/proc/sys/fs/mqueue/msg_default"));
	q = mq_open("/mq_def", O_CREAT | O_EXCL | O_RDWR, 0600, NULL);
	if (q != (mqd_t)-1 && mq_getattr(q, &got) == 0)
		printf("a queue made without attributes: maxmsg %ld\n", got.mq_maxmsg);
	if (q != (mqd_t)-1)
		mq_close(q);
	mq_unlink("/mq_def");

	/* No fd free: EMFILE, and no queue made. */
	struct rlimit old, low;
	REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit");
	int lowest = dup(0);
	REQUIRE(lowest >= 0, "dup");
	close(lowest);
	low = old;
	low.rlim_cur = (rlim_t)lowest;
	REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
	errno = 0;
	q = mq_open("/mq_nofd", O_CREAT | O_EXCL | O_RDWR, 0600, NULL);
	int e = errno;
	REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0, "setrlimit back");
	printf("open O_CREAT with no fd free: %s\n", q == (mqd_t)-1 ? errname(e) : "ok");
	R("and the queue is not made", mq_open("/mq_nofd", O_RDONLY));

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		mq_unlink(names[i]);
	mq_unlink("/mq_nofd");
	printf("mqperm done\n");
	return bad;
}
