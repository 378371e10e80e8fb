/*
 * A live session's spawner: the process the guest start-up (guestinit.c)
 * becomes, under the seccomp filter, when kbox serves a session
 * (KBOX_GUEST_SESSION=1) instead of running one program. It starts each
 * program kbox asks for as a child of its own, so that every run of the
 * session is a guest process of one kernel, and it is the child subreaper
 * of the session's guest processes: what a run leaves behind is reparented
 * to it and reaped by it. kbox hides it from the guest (it is the engine's
 * keeper: dispatch.Engine.BeginSession).
 *
 * Protocol on sock (kbox's socketpair, spawn.go):
 *  - kbox sends a request: a struct spawn_req, then req.len bytes of
 *    NUL-terminated strings: the program's guest path, the working
 *    directory, req.argc arguments, req.envc environment entries;
 *  - the spawner answers 'S' with the child's pid once it forked (or 'E'
 *    and the errno when fork failed), and 'X' with the wait status when
 *    that child is reaped, each as a struct spawn_msg.
 * The child leads a process group of its own (kbox signals the run
 * through it), asks kbox for its standard fds with a getppid call that
 * carries KBOX_SPAWN_MAGIC and the request's id (kbox installs them with
 * SECCOMP_IOCTL_NOTIF_ADDFD), changes directory and execs the program,
 * which kbox serves like any guest execve. The spawner exits when kbox
 * closes its end; the keeper then ends every guest process left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawner.h"

struct spawn_req {
	uint32_t len; /* bytes of strings that follow */
	uint32_t argc, envc, pad;
	uint64_t id;
};

struct spawn_msg {
	uint64_t id;
	int32_t pid;
	int32_t val; /* 'X': the wait status; 'E': the errno */
	uint32_t kind;
	uint32_t pad;
};

/* The largest request: the strings of an argv and environment. */
#define MAX_REQ (8u << 20)

/* What kbox's getppid answers a child whose fds it installed. */
#define STDIO_DONE 0x4b42

struct live {
	uint64_t id;
	pid_t pid;
};

/* What the spawner ignores (its children get every default back). */
static const int ignored[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGTSTP, SIGTTIN,
			       SIGTTOU, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM };

static struct live *lives;
static size_t nlive, caplive;

static void on_child(int sig)
{
	(void)sig; /* only to end ppoll */
}

static void send_msg(int sock, uint64_t id, pid_t pid, int val, char kind)
{
	struct spawn_msg m = { .id = id, .pid = pid, .val = val, .kind = (uint32_t)kind };
	const char *p = (const char *)&m;
	size_t n = sizeof(m);
	while (n > 0) {
		ssize_t w = write(sock, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(0); /* kbox is gone: the keeper ends the rest */
		p += w;
		n -= (size_t)w;
	}
}

/* reap reaps every child that exited and reports the spawned ones;
 * orphans the spawner adopted are reaped silently. */
static void reap(int sock)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return;
		for (size_t i = 0; i < nlive; i++) {
			if (lives[i].pid != pid)
				continue;
			send_msg(sock, lives[i].id, pid, status, 'X');
			lives[i] = lives[--nlive];
			break;
		}
	}
}

static void child(const struct spawn_req *req, char *strs, int sock)
{
	char *path = strs, *cwd = path + strlen(path) + 1, *p = cwd + strlen(cwd) + 1;
	char **argv = calloc(req->argc + 1, sizeof(char *));
	char **envp = calloc(req->envc + 1, sizeof(char *));
	sigset_t none;

	if (argv == NULL || envp == NULL)
		_exit(126);
	for (uint32_t i = 0; i < req->argc; i++, p += strlen(p) + 1)
		argv[i] = p;
	for (uint32_t i = 0; i < req->envc; i++, p += strlen(p) + 1)
		envp[i] = p;
	/* Every signal at its default action, whatever the spawner or kbox
	 * inherited (an ignored signal stays ignored across execve): by the
	 * raw call, which also reaches the signals libc reserves. A zeroed
	 * kernel sigaction is SIG_DFL, no flags, an empty mask. */
	for (int sig = 1; sig <= 64; sig++) {
		unsigned long ksa[4] = { 0 };
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, ksa, NULL, 8);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close(sock);
	setpgid(0, 0);
	if (syscall(SYS_getppid, KBOX_SPAWN_MAGIC, req->id) != STDIO_DONE)
		_exit(126); /* no fds of its own: nothing to say it on */
	if (chdir(cwd) != 0) {
		dprintf(2, "kbox: working directory %s: %s\n", cwd, strerror(errno));
		_exit(126);
	}
	execve(path, argv, envp);
	dprintf(2, "kbox: %s: %s\n", path, strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* valid checks that strs holds the request's 2+argc+envc strings. */
static int valid(const struct spawn_req *req, const char *strs)
{
	uint64_t want = 2 + (uint64_t)req->argc + req->envc, got = 0;
	if (req->len == 0 || strs[req->len - 1] != 0 || req->argc == 0)
		return 0;
	for (uint32_t i = 0; i < req->len; i++)
		got += strs[i] == 0;
	return got == want;
}

void kbox_run_spawner(int sock)
{
	struct sigaction sa;
	sigset_t chld, none;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		sigaction(ignored[i], &sa, NULL);
	sa.sa_handler = on_child; /* no SA_RESTART: ppoll returns EINTR */
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sigemptyset(&none);

	for (;;) {
		struct pollfd pfd = { .fd = sock, .events = POLLIN };
		struct spawn_req req;
		char *strs;
		pid_t pid;

		reap(sock);
		/* SIGCHLD is unblocked only while waiting: none is lost
		 * between the reap and the wait. */
		if (ppoll(&pfd, 1, NULL, &none) < 0)
			continue;
		if (kbox_read_full(sock, &req, sizeof(req)) != 0)
			_exit(0); /* the session ends */
		if (req.len > MAX_REQ)
			_exit(125);
		strs = malloc(req.len + 1);
		if (strs == NULL || kbox_read_full(sock, strs, req.len) != 0)
			_exit(125);
		strs[req.len] = 0;
		if (!valid(&req, strs)) {
			send_msg(sock, req.id, 0, EINVAL, 'E');
			free(strs);
			continue;
		}
		if (nlive == caplive) {
			size_t n = caplive ? 2 * caplive : 64;
			struct live *l = realloc(lives, n * sizeof(*l));
			if (l == NULL) {
				send_msg(sock, req.id, 0, ENOMEM, 'E');
				free(strs);
				continue;
			}
			lives = l;
			caplive = n;
		}
		pid = fork();
		if (pid == 0)
			child(&req, strs, sock);
		if (pid < 0) {
			send_msg(sock, req.id, 0, errno, 'E');
		} else {
			lives[nlive].id = req.id;
			lives[nlive].pid = pid;
			nlive++;
			send_msg(sock, req.id, pid, 0, 'S');
		}
		free(strs);
	}
}
