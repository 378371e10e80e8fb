/*
 * Guest start-up, in the process kbox starts for a guest (KBOX_GUEST_INIT
 * set): the start-up program (seccomp/startup: this file, binder.c,
 * spawner.c and store.c built static), or, in a kbox built without it,
 * kbox itself re-executed, where this runs as a constructor before the Go
 * runtime exists. Either way no Go runtime thread can make a notified
 * syscall before the supervisor holds the listener.
 *
 * The process kbox starts first forks: it stays as the keeper, and its
 * child becomes the guest. The keeper is a child subreaper with a
 * parent-death signal, outside the seccomp filter. It relays the guest's
 * exit status to kbox, and when the guest exits, or kbox itself dies (even
 * by SIGKILL), it kills every process left below it, so no guest process
 * outlives kbox on any path; then it removes kbox's stage directory, its
 * working directory, which kbox cannot do when it was killed.
 *
 * The guest child first puts itself in new network and IPC namespaces
 * (with a user namespace when kbox is not root), so that abstract unix
 * socket names, System V IPC and POSIX message queues are private to the
 * kbox run, and forks the socket binder (binder.c) into them.
 *
 * Protocol on fd 3 (a socketpair end), with the guest child: the child
 * sends 'N' plus the namespaces it made (u32, NS_* bits) and the socket
 * binder's pid (u32, 0 without one: kbox hides it from the guest's /proc,
 * though it is the keeper's child like the guest); kbox sends the start
 * message (read_start: the guest's arguments and environment), then the
 * filter length (u32, in instructions) and the instructions; the child
 * installs the filter and sends 'L' plus its pid and the listener's fd
 * number (u32 each), which kbox takes with pidfd_getfd; kbox answers one
 * byte once it listens; the child execs the guest path, which the
 * supervisor serves like any guest execve, or, for a live session
 * (KBOX_GUEST_SESSION=1), becomes the session's spawner (spawner.c) on
 * fd 3. fd 4 is the binder's socket (kbox holds the other end).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <ftw.h>
#include <sched.h>

#include "binder.h"
#include "spawner.h"
#include "store.h"

/* Namespaces the guest child made, reported to kbox (supervisor.go). */
#define NS_NET 1u
#define NS_IPC 2u
#define NS_USER 4u

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

extern char **environ;

static char guest_path[4096];

static void die(const char *what)
{
	fprintf(stderr, "kbox: guest start-up: %s: %s\n", what, strerror(errno));
	_exit(125);
}

int kbox_read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void drop_env(const char *name)
{
	size_t len = strlen(name);
	char **r, **w;
	for (r = w = environ; *r; r++)
		if (!(strncmp(*r, name, len) == 0 && (*r)[len] == '='))
			*w++ = *r;
	*w = NULL;
}

static void on_signal(int sig)
{
	(void)sig; /* only to end sigsuspend */
}

/* kill_below kills every descendant of the keeper: its children, then
 * whatever reparents to it (it is a subreaper) as they die, until none is
 * left. It waits for the killed to die however long a loaded machine takes
 * to run their exits (a bound on rounds without waiting let the keeper go
 * first, and their children reparent past it), up to 60 s. */
static void kill_below(void)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		char path[64], buf[4096];
		int found = 0, reaped = 0;

		snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			for (char *p = buf; *p;) {
				char *end;
				long pid = strtol(p, &end, 10);
				if (end == p)
					break;
				kill((pid_t)pid, SIGKILL);
				found = 1;
				p = end;
			}
		}
		/* Reap what died; its own children now reparent to us. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			reaped = 1;
		if (!found && !reaped && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
			return;
		if (!reaped) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - start.tv_sec > 60)
				return;
			/* Until a child dies or 1 ms passes: keep() blocks
			 * SIGCHLD, so it stays pending for this wait. A fixed
			 * sleep here cost every run's exit a millisecond. */
			sigset_t chld;
			sigemptyset(&chld);
			sigaddset(&chld, SIGCHLD);
			struct timespec ms = { 0, 1000000 };
			sigtimedwait(&chld, NULL, &ms);
		}
	}
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* remove_stage removes the supervisor's stage directory, the parent of
 * the keeper's working directory (which holds kbox's links to the guest's
 * programs; the socket binder's root is beside it). kbox removes it too
 * when the guest is gone, but cannot when it was killed; and when kbox is
 * killed the guest often exits (its notified syscall fails) before the
 * keeper can tell that kbox is gone. So the keeper removes it whenever no
 * guest process is left. Only a directory named like a stage is touched,
 * and links are not followed. */
static void remove_stage(void)
{
	char cwd[4096];
	char *base;

	if (getcwd(cwd, sizeof(cwd)) == NULL || cwd[0] != '/')
		return;
	base = strrchr(cwd, '/');
	if (base == cwd || strcmp(base, "/p") != 0)
		return;
	*base = 0;
	base = strrchr(cwd, '/');
	if (strncmp(base + 1, "kbox-stage-", 11) != 0)
		return;
	nftw(cwd, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* make_namespaces puts the calling process in new network and IPC
 * namespaces: its own abstract socket names, System V IPC objects and
 * POSIX message queues, and no reach into the host's network. root needs
 * nothing more; anybody else makes a user namespace with them, in which
 * the process keeps its own uid and gid (mapped to themselves, nothing
 * else mapped, setgroups denied). It returns the NS_* bits made: none
 * when neither works. */
static unsigned int make_namespaces(void)
{
	char map[64];
	unsigned int uid = (unsigned int)geteuid(), gid = (unsigned int)getegid();

	if (unshare(CLONE_NEWNET | CLONE_NEWIPC) == 0)
		return NS_NET | NS_IPC;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC) != 0)
		return 0;
	if (write_file("/proc/self/setgroups", "deny") != 0 && errno != ENOENT)
		die("user namespace: setgroups");
	snprintf(map, sizeof(map), "%u %u 1\n", uid, uid);
	if (write_file("/proc/self/uid_map", map) != 0)
		die("user namespace: uid_map");
	snprintf(map, sizeof(map), "%u %u 1\n", gid, gid);
	if (write_file("/proc/self/gid_map", map) != 0)
		die("user namespace: gid_map");
	return NS_NET | NS_IPC | NS_USER;
}

/* start_binder forks the socket binder (binder.c) in the caller's
 * namespaces. It is the keeper's child (CLONE_PARENT), not the guest's: a
 * guest waiting for any child never sees it, and the keeper, a subreaper,
 * kills it with the rest at the end. kbox learns that it runs from its
 * first answer. */
static unsigned int start_binder(int sock, const char *dir, int chroot_ok)
{
	long pid = syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), NULL, NULL, NULL, NULL);

	if (pid < 0)
		die("fork the socket binder");
	if (pid == 0)
		kbox_run_binder(sock, dir, chroot_ok);
	return (unsigned int)pid;
}

/* keep runs the keeper until the guest child exits, then exits the same
 * way. */
static void keep(pid_t guest, pid_t kbox)
{
	static const int ignored[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGTSTP, SIGTTIN,
				       SIGTTOU, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM };
	struct sigaction sa;
	int status = 0;

	/*
	 * The signals that wake the keeper (SIGCHLD, and the parent-death
	 * SIGTERM, sent each time the keeper's parent thread changes as
	 * kbox's threads exit) stay blocked but while it waits in sigsuspend,
	 * which unblocks them atomically: one that comes between the check
	 * of its parent and the wait stays pending and ends the wait. (A
	 * blocking wait4 there could miss the last SIGTERM under load and
	 * leave the guest running after kbox died.)
	 */
	sigset_t wake, waiting;
	sigemptyset(&wake);
	sigaddset(&wake, SIGCHLD);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++) {
		sigaction(ignored[i], &sa, NULL);
		sigaddset(&wake, ignored[i]);
	}
	sigprocmask(SIG_BLOCK, &wake, &waiting);
	sigdelset(&waiting, SIGCHLD);
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		sigdelset(&waiting, ignored[i]);
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	for (;;) {
		if (getppid() != kbox) {
			/* kbox is gone (killed, crashed): nothing may outlive it. */
			kill_below();
			remove_stage();
			_exit(137);
		}
		pid_t pid = wait4(-1, &status, WNOHANG, NULL);
		if (pid == guest)
			break;
		if (pid < 0 && errno == ECHILD)
			_exit(125);
		if (pid == 0)
			sigsuspend(&waiting);
	}
	kill_below();
	remove_stage();
	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	/* Die of the same signal, without a core dump of the keeper. */
	struct rlimit no_core = { 0, 0 };
	setrlimit(RLIMIT_CORE, &no_core);
	signal(WTERMSIG(status), SIG_DFL);
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	raise(WTERMSIG(status));
	_exit(128 + WTERMSIG(status));
}

/*
 * The start message: kbox starts this process before it knows the guest
 * (prespawn.go: beside the kernel's boot), so what an exec would carry
 * comes on fd 3 once the namespaces are made: 'C', a u32 length and that
 * many bytes: the argument count in decimal, the arguments, then the
 * environment (with KBOX_GUEST_EXEC, _NOFILE, _SESSION), each ending in a
 * NUL. EOF first: kbox did not need this process. Returns the arguments;
 * environ becomes the environment.
 */
static char **read_start(int sock)
{
	char tag;
	unsigned int len, nf = 0, argc, i;
	char *buf, *p, **f, **args;

	if (kbox_read_full(sock, &tag, 1) != 0)
		_exit(0);
	if (tag != 'C' || kbox_read_full(sock, &len, sizeof(len)) != 0 || len == 0 || len > (32u << 20))
		die("read start message");
	buf = malloc(len);
	if (buf == NULL || kbox_read_full(sock, buf, len) != 0 || buf[len - 1] != '\0')
		die("read start message");
	for (i = 0; i < len; i++)
		nf += buf[i] == '\0';
	f = calloc(nf + 1, sizeof(*f));
	if (f == NULL)
		die("start message");
	for (p = buf, i = 0; i < nf; i++, p += strlen(p) + 1)
		f[i] = p;
	argc = (unsigned int)strtoul(f[0], NULL, 10);
	if (argc > nf - 1)
		die("start message");
	args = calloc(argc + 1, sizeof(*args));
	if (args == NULL)
		die("start message");
	memcpy(args, f + 1, argc * sizeof(*args));
	/* The environment is the rest of f, NULL-terminated by calloc. */
	environ = f + 1 + argc;
	return args;
}

/*
 * guest_start is the start-up, or the socket binder alone, as the
 * environment asks; it returns in any other process (kbox itself).
 */
static void guest_start(void)
{
	const char *init = getenv("KBOX_GUEST_INIT");
	const char *want_ns = getenv("KBOX_GUEST_NS");
	const char *sockdir = getenv("KBOX_GUEST_SOCKDIR");
	const char *path, *nofile, *session;
	int serve;
	const int sock = 3, binder = 4;
	unsigned int ns = 0, binder_pid = 0;
	unsigned int len;
	struct sock_filter *insns;
	struct sock_fprog prog;
	struct rlimit rl;
	long listener;
	char **argv;

	/* The content store's helper (store.c), for a kbox that may not
	 * mount: on fd 3, in the namespaces kbox made for it. */
	const char *store = getenv("KBOX_STORE_HELPER");
	if (store != NULL && strcmp(store, "1") == 0)
		_exit(kbox_run_store(3));

	/* The socket binder alone, for a guest in kbox's own process (the
	 * in-process tiers: unixsock.BinderStarter), on fd 4, in kbox's
	 * namespaces. */
	const char *binder_only = getenv("KBOX_BINDER_ONLY");
	if (binder_only != NULL && strcmp(binder_only, "1") == 0 && sockdir != NULL)
		kbox_run_binder(binder, sockdir, geteuid() == 0);

	if (init == NULL || strcmp(init, "1") != 0)
		return;

	{
		pid_t kbox = getppid(), guest = fork();
		if (guest < 0)
			die("fork");
		if (guest > 0) {
			close(sock);
			close(binder);
			keep(guest, kbox);
		}
	}

	if (want_ns != NULL && strcmp(want_ns, "1") == 0)
		ns = make_namespaces();
	if (sockdir != NULL && fcntl(binder, F_GETFD) >= 0)
		binder_pid = start_binder(binder, sockdir, ns != 0 || geteuid() == 0);
	close(binder);
	{
		char hello[9] = { 'N' };
		memcpy(hello + 1, &ns, sizeof(ns));
		memcpy(hello + 5, &binder_pid, sizeof(binder_pid));
		if (write(sock, hello, sizeof(hello)) != (ssize_t)sizeof(hello))
			die("send namespaces");
	}

	/* The guest leads a process group of its own, so that kill(0) and
	 * kill(-pgrp) in the guest's tree reach guest processes only, never the
	 * keeper (dispatch/sys_signal.go). When the keeper's group has the
	 * terminal, the guest's group takes it. */
	{
		int fg = isatty(0) && tcgetpgrp(0) == getpgrp();
		if (setpgid(0, 0) != 0)
			die("setpgid");
		if (fg) {
			sigset_t ttou, old;
			sigemptyset(&ttou);
			sigaddset(&ttou, SIGTTOU);
			sigprocmask(SIG_BLOCK, &ttou, &old);
			if (tcsetpgrp(0, getpid()) != 0)
				die("tcsetpgrp");
			sigprocmask(SIG_SETMASK, &old, NULL);
		}
	}

	/* What is the guest's: kbox may have started this process before it
	 * knew (prespawn.go). */
	argv = read_start(sock);
	path = getenv("KBOX_GUEST_EXEC");
	nofile = getenv("KBOX_GUEST_NOFILE");
	session = getenv("KBOX_GUEST_SESSION");
	serve = session != NULL && strcmp(session, "1") == 0;
	if (path == NULL && !serve)
		die("start message without a program");
	if (path != NULL && strlen(path) >= sizeof(guest_path))
		_exit(125);
	if (path != NULL)
		strcpy(guest_path, path);
	drop_env("KBOX_GUEST_EXEC");
	drop_env("KBOX_GUEST_NOFILE");
	drop_env("KBOX_GUEST_SESSION");

	/* Virtual fds start where the host fd limit ends: the soft limit,
	 * which is what the kernel allocates fds by. The hard limit stays, so
	 * that kbox can raise the soft one for a moment to install an fd at a
	 * virtual number (an execveat by a virtual fd, dispatch/sys_proc_exec.go). */
	if (nofile != NULL && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rlim_t max = (rlim_t)strtoul(nofile, NULL, 10);
		if (rl.rlim_cur > max)
			rl.rlim_cur = max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			die("setrlimit");
	}

	if (kbox_read_full(sock, &len, sizeof(len)) != 0 || len == 0 || len > 4096)
		die("read filter length");
	insns = calloc(len, sizeof(*insns));
	if (insns == NULL || kbox_read_full(sock, insns, len * sizeof(*insns)) != 0)
		die("read filter");
	prog.len = (unsigned short)len;
	prog.filter = insns;

	/* A session's spawner adopts what its runs leave behind
	 * (spawner.c); prctl is kbox's to serve once the filter is on. */
	if (serve && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		die("subreaper");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		die("no_new_privs");
	listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			   SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
	if (listener < 0 && errno == EINVAL)
		listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				   SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (listener < 0)
		die("install seccomp filter");

	{
		/* Only the number of the listener: kbox takes it with
		 * pidfd_getfd (sendmsg is notified now, and nobody listens
		 * yet). */
		char byte = 'L', hello[9] = { 'L' };
		unsigned int self = (unsigned int)getpid(), lfd = (unsigned int)listener;

		memcpy(hello + 1, &self, sizeof(self));
		memcpy(hello + 5, &lfd, sizeof(lfd));
		if (write(sock, hello, sizeof(hello)) != (ssize_t)sizeof(hello))
			die("send listener");
		if (kbox_read_full(sock, &byte, 1) != 0)
			die("wait for supervisor");
		close((int)lfd);
	}
	if (serve)
		kbox_run_spawner(sock);
	close(sock);
	execve(guest_path, argv, environ);
	fprintf(stderr, "kbox: %s: %s\n", guest_path, strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

#ifdef KBOX_STARTUP_PROGRAM
/*
 * The start-up program (seccomp/startup): this file, binder.c, spawner.c
 * and store.c built static, which kbox executes from a sealed memfd
 * passed as fd 5 instead of re-executing its own binary. fd 5 is closed
 * first: nothing below may inherit it. Executed by that number, its name
 * (what ps shows) would be "5": it takes argv[0]'s.
 */
int main(int argc, char **argv)
{
	close(5);
	if (argc > 0) { /* the name ps shows: kbox-guest, kbox-socket-binder */
		const char *slash = strrchr(argv[0], '/');
		prctl(PR_SET_NAME, slash != NULL ? slash + 1 : argv[0], 0, 0, 0);
	}
	guest_start();
	fputs("kbox-guest: kbox's guest start-up program: kbox runs it\n", stderr);
	return 2;
}
#else
/* Built into kbox: its re-execution runs the start-up before Go starts. */
__attribute__((constructor(101))) static void kbox_guest_init(void)
{
	guest_start();
}
#endif
