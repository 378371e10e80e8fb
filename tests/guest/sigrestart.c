/* sigrestart: what a handled signal does to a blocking system call, as
 * signal(7) says. "sigrestart DIR [CASE...]" runs each case (all without
 * names) twice: with a SIGUSR1 handler installed with SA_RESTART and
 * without it. A thread sends SIGUSR1 to the main thread every 2 ms while
 * the main thread blocks in the call; another thread makes the call
 * complete after 400 ms (writes to the pipe, opens the FIFO's other end,
 * connects, sends, unlocks...). One line per case and mode:
 *   CASE restart|intr RESULT
 * RESULT is "ok" (the call completed with the right result while the
 * handler ran), "EINTR", "nosig" (completed, but no signal came during
 * it), "skip" (this environment cannot make the case: fork is refused in
 * the in-process tiers) or "bad:..." (anything else). On Linux the calls
 * signal(7) lists as restarted are "ok" with SA_RESTART and "EINTR"
 * without; nanosleep, poll, select, epoll_wait, pause and a socket with
 * a receive timeout are "EINTR" either way. DIR is a writable directory
 * (the FIFO, the unix socket and the lock file are made there).
 *
 * "sigrestart DIR storm N [restart]" is a bounded kill10: 5 processes
 * (threads where fork is refused) signal each other with handlers
 * without SA_RESTART (with it: restart) while each makes N calls that
 * Linux never interrupts (kill, getppid, stat, open and close of a
 * regular file, getcwd); it prints "storm N [restart] eintr=E other=O
 * signals=yes|no", E and O being the calls that failed with EINTR and
 * otherwise (Linux: 0 and 0).
 *
 * "sigrestart DIR accepts N" makes N TCP connections over loopback, one
 * at a time, to a listener whose accept (SA_RESTART handler) a thread
 * signals without pause: every connection must be accepted, none lost
 * to a signal that came as it was dequeued. It prints "accepts N ok
 * signals=yes|no", or "accepts N lost after K" when no connection came
 * for 10 s. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DELAY_MS 400
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129

static const char *dir;
static pid_t main_tid;
static atomic_int signals, stop_signalling;
/* in_call is 1 while the main thread is in a case's call. */
static atomic_int in_call;
static char path[256];

static void on_usr1(int sig)
{
	(void)sig;
	signals++;
}

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void *signaller(void *arg)
{
	(void)arg;
	while (!stop_signalling) {
		syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
		nap(2);
	}
	return NULL;
}

/* A case: prepare (before the threads), complete (the other thread, after
 * DELAY_MS), call (the main thread: returns 0 when the call completed
 * right, -1 with errno when it failed, 1 when it completed wrong), and
 * clean. */
struct tcase {
	const char *name;
	int (*prepare)(void);
	void (*complete)(void);
	int (*call)(void);
	void (*clean)(void);
};

static int fds[4] = {-1, -1, -1, -1};
static pid_t child = -1;
static atomic_int futex_word;

static void closeall(void)
{
	for (int i = 0; i < 4; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	if (child > 0) {
		kill(child, SIGKILL);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	child = -1;
	unlink(path);
}

static int nothing(void) { return 0; }
static void none(void) {}

/* read on a pipe */
static int pipe_prep(void) { return pipe(fds); }
static void pipe_done(void) { write(fds[1], "abc", 3); }
static int pipe_call(void)
{
	char b[8];
	ssize_t n = read(fds[0], b, sizeof b);
	return n < 0 ? -1 : n == 3 && memcmp(b, "abc", 3) == 0 ? 0 : 1;
}

/* wait4 on a child that exits 7 */
static int wait_prep(void)
{
	child = fork();
	if (child == 0) {
		nap(DELAY_MS);
		_exit(7);
	}
	return child < 0 ? -1 : 0;
}
static int wait_call(void)
{
	int st;
	pid_t p = wait4(child, &st, 0, NULL);
	if (p < 0)
		return -1;
	child = -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 1;
}

/* open of a FIFO for reading, waiting for a writer */
static int fifo_prep(void)
{
	snprintf(path, sizeof path, "%s/sigrestart.fifo", dir);
	unlink(path);
	return mkfifo(path, 0600);
}
static void fifo_done(void)
{
	/* The writer's open does not wait. A reader whose open a signal
	 * interrupts is no reader until its open restarts, on Linux too: the
	 * writer's open fails with ENXIO then, or its write with EPIPE when
	 * the reader left after the open. Both are tried again (a new write
	 * end first, so that a reader that came meanwhile never sees EOF)
	 * while the main thread is in its call; once it is out (EINTR) no
	 * write end is needed. */
	int fd = -1;
	for (;;) {
		int nfd = open(path, O_WRONLY | O_NONBLOCK);
		if (nfd < 0 && errno == ENXIO && in_call) {
			nap(1);
			continue;
		}
		if (nfd < 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = nfd;
		if (write(fd, "f", 1) == 1 || errno != EPIPE || !in_call)
			break;
		nap(1);
	}
	fds[1] = fd;
}
static int fifo_call(void)
{
	fds[0] = open(path, O_RDONLY);
	if (fds[0] < 0)
		return -1;
	char c;
	return read(fds[0], &c, 1) == 1 && c == 'f' ? 0 : 1;
}

/* accept on a unix stream socket and on a TCP socket of 127.0.0.1 */
static int unix_listener(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(path, sizeof path, "%s/sigrestart.sock", dir);
	unlink(path);
	strcpy(a.sun_path, path);
	fds[0] = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fds[0] < 0 || bind(fds[0], (struct sockaddr *)&a, sizeof a) < 0 || listen(fds[0], 0) < 0)
		return -1;
	return 0;
}
static int unix_connect(int flags)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | flags, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS && errno != EAGAIN) {
		close(fd);
		return -1;
	}
	return fd;
}
static void unix_done(void) { fds[1] = unix_connect(0); }
static int accept_call(void)
{
	fds[2] = accept(fds[0], NULL, NULL);
	return fds[2] < 0 ? -1 : 0;
}

static struct sockaddr_in tcp_addr;
static int tcp_listener(void)
{
	socklen_t l = sizeof tcp_addr;
	memset(&tcp_addr, 0, sizeof tcp_addr);
	tcp_addr.sin_family = AF_INET;
	tcp_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[0] < 0 || bind(fds[0], (struct sockaddr *)&tcp_addr, sizeof tcp_addr) < 0 || listen(fds[0], 4) < 0 ||
	    getsockname(fds[0], (struct sockaddr *)&tcp_addr, &l) < 0)
		return -1;
	return 0;
}
static void tcp_done(void)
{
	fds[1] = socket(AF_INET, SOCK_STREAM, 0);
	connect(fds[1], (struct sockaddr *)&tcp_addr, sizeof tcp_addr);
}

/* recv on a connected unix stream socket and on a TCP connection */
static int unixpair_prep(void) { return socketpair(AF_UNIX, SOCK_STREAM, 0, fds); }
static void send_done(void) { send(fds[1], "xyz", 3, 0); }
static int recv_call(void)
{
	char b[8];
	ssize_t n = recv(fds[0], b, sizeof b, 0);
	return n < 0 ? -1 : n == 3 && memcmp(b, "xyz", 3) == 0 ? 0 : 1;
}
static int tcp_pair_prep(void)
{
	if (tcp_listener() < 0)
		return -1;
	fds[1] = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fds[1], (struct sockaddr *)&tcp_addr, sizeof tcp_addr) < 0)
		return -1;
	fds[2] = accept(fds[0], NULL, NULL);
	if (fds[2] < 0)
		return -1;
	close(fds[0]);
	fds[0] = fds[2];
	fds[2] = -1;
	return 0;
}

/* recv with SO_RCVTIMEO: EINTR even with SA_RESTART */
static int timeo_prep(void)
{
	if (unixpair_prep() < 0)
		return -1;
	struct timeval tv = {5, 0};
	return setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* connect to a unix listener whose backlog is full */
static int connect_prep(void)
{
	if (unix_listener() < 0)
		return -1;
	/* Backlog 0 takes one connection; then connect waits. */
	fds[1] = unix_connect(SOCK_NONBLOCK);
	return fds[1] < 0 ? -1 : 0;
}
static void connect_done(void) { fds[3] = accept(fds[0], NULL, NULL); }
static int connect_call(void)
{
	fds[2] = unix_connect(0);
	return fds[2] < 0 ? -1 : 0;
}

/* sendmsg on a unix stream socket whose peer's buffer is full */
static int full_prep(void)
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0)
		return -1;
	int one = 4096;
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof one);
	char b[512] = {0};
	while (send(fds[0], b, sizeof b, MSG_DONTWAIT) > 0)
		;
	return errno == EAGAIN ? 0 : -1;
}
static void drain_done(void)
{
	char b[4096];
	while (recv(fds[1], b, sizeof b, MSG_DONTWAIT) > 0)
		;
}
static int sendmsg_call(void)
{
	char b[64] = {1};
	struct iovec iov = {b, sizeof b};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n = sendmsg(fds[0], &m, 0);
	return n < 0 ? -1 : n == sizeof b ? 0 : 1;
}

/* flock, fcntl F_OFD_SETLKW (two open files of one process) and F_SETLKW
 * (a child holds the lock) */
static int lockfile(void)
{
	snprintf(path, sizeof path, "%s/sigrestart.lock", dir);
	fds[0] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	fds[1] = open(path, O_RDWR);
	return fds[0] < 0 || fds[1] < 0 ? -1 : 0;
}
static int flock_prep(void) { return lockfile() < 0 ? -1 : flock(fds[0], LOCK_EX); }
static void flock_done(void) { flock(fds[0], LOCK_UN); }
static int flock_call(void) { return flock(fds[1], LOCK_EX); }

static struct flock wrlock(short type)
{
	struct flock f = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
	return f;
}
static int ofd_prep(void)
{
	struct flock f = wrlock(F_WRLCK);
	return lockfile() < 0 ? -1 : fcntl(fds[0], F_OFD_SETLK, &f);
}
static void ofd_done(void)
{
	struct flock f = wrlock(F_UNLCK);
	fcntl(fds[0], F_OFD_SETLK, &f);
}
static int ofd_call(void)
{
	struct flock f = wrlock(F_WRLCK);
	return fcntl(fds[1], F_OFD_SETLKW, &f);
}
static int setlkw_prep(void)
{
	int p[2];
	if (lockfile() < 0 || pipe(p) < 0)
		return -1;
	child = fork();
	if (child == 0) {
		struct flock f = wrlock(F_WRLCK);
		if (fcntl(fds[0], F_SETLK, &f) < 0)
			_exit(1);
		write(p[1], "l", 1);
		nap(DELAY_MS);
		_exit(0);
	}
	char c;
	close(p[1]);
	int r = child < 0 || read(p[0], &c, 1) != 1 ? -1 : 0;
	close(p[0]);
	return r;
}
static int setlkw_call(void)
{
	struct flock f = wrlock(F_WRLCK);
	return fcntl(fds[1], F_SETLKW, &f);
}

/* FUTEX_WAIT without a timeout */
static int futex_prep(void)
{
	futex_word = 0;
	return 0;
}
static void futex_done(void)
{
	futex_word = 1;
	syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
static int futex_call(void)
{
	for (;;) {
		long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
		if (r < 0 && errno != EAGAIN)
			return -1;
		if (futex_word == 1)
			return 0;
	}
}

/* Never restarted: EINTR with SA_RESTART too. */
static int nanosleep_call(void)
{
	struct timespec ts = {2, 0};
	return nanosleep(&ts, NULL);
}
static int poll_call(void)
{
	struct pollfd p = {fds[0], POLLIN, 0};
	int r = poll(&p, 1, 2000);
	return r < 0 ? -1 : r == 1 ? 0 : 1;
}
static int select_call(void)
{
	fd_set s;
	FD_ZERO(&s);
	FD_SET(fds[0], &s);
	struct timeval tv = {2, 0};
	int r = select(fds[0] + 1, &s, NULL, NULL, &tv);
	return r < 0 ? -1 : r == 1 ? 0 : 1;
}
static int epoll_call(void)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN}, out;
	epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev);
	int r = epoll_wait(ep, &out, 1, 2000);
	int e = errno;
	close(ep);
	errno = e;
	return r < 0 ? -1 : r == 1 ? 0 : 1;
}
static int pause_call(void) { return pause(); }

static const struct tcase cases[] = {
	{"read-pipe", pipe_prep, pipe_done, pipe_call, closeall},
	{"wait4", wait_prep, none, wait_call, closeall},
	{"open-fifo", fifo_prep, fifo_done, fifo_call, closeall},
	{"accept-unix", unix_listener, unix_done, accept_call, closeall},
	{"accept-tcp", tcp_listener, tcp_done, accept_call, closeall},
	{"recv-unix", unixpair_prep, send_done, recv_call, closeall},
	{"recv-tcp", tcp_pair_prep, send_done, recv_call, closeall},
	{"connect-unix", connect_prep, connect_done, connect_call, closeall},
	{"sendmsg-unix", full_prep, drain_done, sendmsg_call, closeall},
	{"flock", flock_prep, flock_done, flock_call, closeall},
	{"ofd-setlkw", ofd_prep, ofd_done, ofd_call, closeall},
	{"setlkw", setlkw_prep, none, setlkw_call, closeall},
	{"futex", futex_prep, futex_done, futex_call, closeall},
	{"nanosleep", nothing, none, nanosleep_call, closeall},
	{"poll", pipe_prep, pipe_done, poll_call, closeall},
	{"select", pipe_prep, pipe_done, select_call, closeall},
	{"epoll", pipe_prep, pipe_done, epoll_call, closeall},
	{"pause", nothing, none, pause_call, closeall},
	{"recv-timeo", timeo_prep, send_done, recv_call, closeall},
};

static void *completer(void *arg)
{
	const struct tcase *c = arg;
	nap(DELAY_MS);
	c->complete();
	return NULL;
}

static void run(const struct tcase *c, int restart)
{
	const char *mode = restart ? "restart" : "intr";
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGUSR1, &sa, NULL);
	if (c->prepare() < 0) {
		int e = errno;
		c->clean();
		if (e == ENOSYS)
			printf("%s %s skip\n", c->name, mode);
		else
			printf("%s %s bad:prepare:%s\n", c->name, mode, strerror(e));
		return;
	}
	pthread_t sig, comp;
	stop_signalling = 0;
	signals = 0;
	pthread_create(&comp, NULL, completer, (void *)c);
	pthread_create(&sig, NULL, signaller, NULL);
	in_call = 1;
	int r = c->call();
	int e = errno;
	in_call = 0;
	int seen = signals;
	stop_signalling = 1;
	pthread_join(sig, NULL);
	if (r < 0 && e == EINTR && strcmp(c->name, "pause") != 0 && strcmp(c->name, "nanosleep") != 0)
		/* Let the completer run out so that it finds what it expects. */
		nap(DELAY_MS);
	pthread_join(comp, NULL);
	/* Signals still pending now are taken before the next case. */
	nap(10);
	c->clean();
	if (r == 0)
		printf("%s %s %s\n", c->name, mode, seen > 0 ? "ok" : "nosig");
	else if (r < 0 && e == EINTR)
		printf("%s %s EINTR\n", c->name, mode);
	else if (r < 0)
		printf("%s %s bad:%s\n", c->name, mode, strerror(e));
	else
		printf("%s %s bad:result\n", c->name, mode);
	fflush(stdout);
}

/* The storm: processes (or threads) signal each other while making calls
 * that Linux never interrupts. */
static atomic_int storm_sigs;

static void on_storm(int sig)
{
	(void)sig;
	storm_sigs++;
}

static void storm_calls(int n, pid_t peer, int *eintr, int *other)
{
	struct stat st;
	char cwd[256];
	/* path is storm's, set before the threads start: writing it here
	 * raced with another thread's open (a torn name: ENOENT). */
	for (int i = 0; i < n; i++) {
		int r;
		switch (i % 5) {
		case 0:
			r = kill(peer, SIGUSR2);
			break;
		case 1:
			r = stat("/", &st);
			break;
		case 2:
			r = open(path, O_RDONLY);
			if (r >= 0)
				r = close(r);
			break;
		case 3:
			r = getcwd(cwd, sizeof cwd) ? 0 : -1;
			break;
		default:
			/* 0 for the first guest process, as for a PID
			 * namespace's init. libc's getppid has no error path:
			 * a failure is the raw -errno. */
			r = getppid();
			if (r < 0) {
				errno = -r;
				r = -1;
			} else
				r = 0;
		}
		if (r < 0 && errno == EINTR)
			(*eintr)++;
		else if (r < 0) {
			if (!*other)
				fprintf(stderr, "storm: call %d failed: %s\n", i % 5, strerror(errno));
			(*other)++;
		}
	}
}

struct stormer {
	int n;
	pid_t peer;
	int eintr, other;
};

static void *storm_thread(void *arg)
{
	struct stormer *s = arg;
	storm_calls(s->n, s->peer, &s->eintr, &s->other);
	return NULL;
}

static int storm(int n, int restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_storm;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGUSR2, &sa, NULL);
	snprintf(path, sizeof path, "%s/sigrestart.storm", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	int eintr = 0, other = 0, sigs = 0;
	pid_t kids[4];
	int p[2];
	pipe(p);
	int k = 0;
	for (; k < 4; k++) {
		kids[k] = fork();
		if (kids[k] < 0)
			break;
		if (kids[k] == 0) {
			/* Each child signals the process before it (the first:
			 * the parent), and reports its counts on the pipe. */
			int e = 0, o = 0;
			pid_t peer = k > 0 ? kids[k - 1] : 0;
			if (k == 0)
				while ((peer = getppid()) < 0)
					; /* not a call measured */
			storm_calls(n, peer, &e, &o);
			int rep[3] = {e, o, storm_sigs};
			write(p[1], rep, sizeof rep);
			_exit(0);
		}
	}
	if (k == 0) {
		/* fork refused (the in-process tiers): threads of one process,
		 * signalling the process. */
		struct stormer s[4];
		pthread_t t[4];
		for (int i = 0; i < 4; i++) {
			s[i] = (struct stormer){n, getpid(), 0, 0};
			pthread_create(&t[i], NULL, storm_thread, &s[i]);
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(t[i], NULL);
			eintr += s[i].eintr;
			other += s[i].other;
		}
		sigs = storm_sigs;
	} else {
		/* The parent signals the last child meanwhile, then reaps. */
		storm_calls(n, kids[k - 1], &eintr, &other);
		sigs = storm_sigs;
		for (int i = 0; i < k; i++) {
			int rep[3];
			while (read(p[0], rep, sizeof rep) < 0 && errno == EINTR)
				;
			eintr += rep[0];
			other += rep[1];
			sigs += rep[2];
		}
		for (int i = 0; i < k; i++)
			while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
				;
	}
	unlink(path);
	printf("storm %d%s eintr=%d other=%d signals=%s\n", n, restart ? " restart" : "", eintr, other, sigs > 0 ? "yes" : "no");
	return 0;
}

/* accepts: see the head comment. */
static atomic_int accepted;
static void *connector(void *arg)
{
	int n = *(int *)arg;
	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		while (connect(c, (struct sockaddr *)&tcp_addr, sizeof tcp_addr) < 0 && errno == EINTR)
			;
		close(c);
		/* the next one when this one was taken: the accept waits
		 * for each */
		while (accepted <= i)
			usleep(50);
	}
	return NULL;
}

static void *hurrier(void *arg)
{
	(void)arg;
	while (!stop_signalling) {
		syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
		usleep(20);
	}
	return NULL;
}

static void *watchdog(void *arg)
{
	int n = *(int *)arg, last = -1, still = 0;
	for (;;) {
		nap(100);
		int now = accepted;
		if (now == n)
			return NULL;
		still = now == last ? still + 1 : 0;
		if (still == 100) {
			printf("accepts %d lost after %d\n", n, now);
			_exit(1);
		}
		last = now;
	}
}

static int accepts(int n)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	if (tcp_listener() < 0) {
		printf("accepts %d bad:listen:%s\n", n, strerror(errno));
		return 1;
	}
	pthread_t c, h, w;
	pthread_create(&w, NULL, watchdog, &n);
	pthread_create(&h, NULL, hurrier, NULL);
	pthread_create(&c, NULL, connector, &n);
	for (int i = 0; i < n; i++) {
		int a = accept(fds[0], NULL, NULL);
		if (a < 0) {
			printf("accepts %d bad:%s after %d\n", n, strerror(errno), i);
			_exit(1);
		}
		close(a);
		accepted++;
	}
	stop_signalling = 1;
	pthread_join(c, NULL);
	pthread_join(h, NULL);
	pthread_join(w, NULL);
	close(fds[0]);
	printf("accepts %d ok signals=%s\n", n, signals > 0 ? "yes" : "no");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: sigrestart DIR [CASE...] | sigrestart DIR storm N [restart]\n");
		return 2;
	}
	dir = argv[1];
	main_tid = gettid();
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* A completer may write to a FIFO whose reader just gave up (its
	 * open interrupted after the writer's open found it): EPIPE, as
	 * Linux can give in the same race, not a kill. */
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 4 && strcmp(argv[2], "accepts") == 0)
		return accepts(atoi(argv[3]));
	if (argc >= 4 && strcmp(argv[2], "storm") == 0)
		return storm(atoi(argv[3]), argc > 4 && strcmp(argv[4], "restart") == 0);
	int n = sizeof cases / sizeof cases[0];
	for (int i = 0; i < n; i++) {
		int want = argc == 2;
		for (int j = 2; j < argc; j++)
			want |= strcmp(argv[j], cases[i].name) == 0;
		if (!want)
			continue;
		run(&cases[i], 1);
		run(&cases[i], 0);
	}
	return 0;
}
