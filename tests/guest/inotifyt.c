/* inotifyt: inotify as Linux gives it. "inotifyt DIR" works in DIR (which
 * it empties first) and prints one line per case, the same natively and
 * under kbox (TestInotify compares them):
 *   - inotify_init1's flags (EINVAL, IN_NONBLOCK, IN_CLOEXEC), inotify_init;
 *   - inotify_add_watch: relative paths, symlinks and IN_DONT_FOLLOW,
 *     IN_ONLYDIR, IN_MASK_ADD, IN_MASK_CREATE, and the errors ENOENT,
 *     ENOTDIR, EACCES, EINVAL, EBADF, EEXIST; inotify_rm_watch and EINVAL;
 *   - events of files created, written, renamed (one cookie), removed, of
 *     directories made, IN_ONESHOT, by this process and by another one
 *     (this program run again: "inotifyt -do OP PATH");
 *   - no event of what was written before the first watch; the fd's
 *     fdinfo;
 *   - events of several calls in one read, merged repeats, reads of one
 *     bare event's size;
 *   - the fd in read (blocking, woken by another process; IN_NONBLOCK's
 *     EAGAIN), poll, select and epoll beside a pipe, FIONREAD.
 * An event line lists the events that came, "MASK name", sorted, each
 * once: when kbox writes a file back to LKL (a shadow) is its own.
 * "inotifyt -oneproc DIR" makes "another process"'s changes from a thread
 * of its own instead (kbox's in-process tiers run one process) and skips
 * the EACCES case, which needs a process with other credentials. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *self;
static int oneproc;

static const char *en(long r);
static char dir[512];

static const char *en(long r)
{
	if (r >= 0)
		return "ok";
	switch (errno) {
	case EINVAL: return "EINVAL";
	case ENOENT: return "ENOENT";
	case ENOTDIR: return "ENOTDIR";
	case EACCES: return "EACCES";
	case EBADF: return "EBADF";
	case EEXIST: return "EEXIST";
	case EAGAIN: return "EAGAIN";
	case ENOSYS: return "ENOSYS";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	}
	static char b[32];
	snprintf(b, sizeof b, "errno%d", errno);
	return b;
}

static char *at(const char *name)
{
	static char b[4][600];
	static int i;
	i = (i + 1) % 4;
	snprintf(b[i], sizeof b[i], "%s/%s", dir, name);
	return b[i];
}

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* do_op is the other process's change. */
static int do_op(const char *op, const char *p)
{
	if (strcmp(op, "create") == 0 || strcmp(op, "append") == 0) {
		int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd < 0 || write(fd, "x\n", 2) != 2)
			return 1;
		return close(fd) != 0;
	}
	if (strcmp(op, "mkdir") == 0)
		return mkdir(p, 0755) != 0;
	if (strcmp(op, "unlink") == 0)
		return unlink(p) != 0;
	if (strcmp(op, "watch") == 0) {
		/* add_watch's answer for p, and the fd's /proc link */
		int fd = inotify_init1(0);
		char l[64] = "";
		char fdl[32];
		snprintf(fdl, sizeof fdl, "/proc/self/fd/%d", fd);
		readlink(fdl, l, sizeof l - 1);
		printf("watch %s %s link %s\n", p, en(inotify_add_watch(fd, p, IN_ALL_EVENTS)), l);
		return 0;
	}
	return 2;
}

/* other runs "self -do op p" after ms milliseconds, in a process of its
 * own (with -oneproc: in a thread); the caller reaps it. */
struct job {
	long ms;
	const char *op, *p;
	int status;
	pthread_t th;
};
static struct job jobs[8];
static int njobs;

static void *run_job(void *arg)
{
	struct job *j = arg;
	nap(j->ms);
	j->status = do_op(j->op, j->p);
	return NULL;
}

static pid_t other(long ms, const char *op, const char *p)
{
	if (oneproc) {
		struct job *j = &jobs[njobs % 8];
		*j = (struct job){ms, op, p, -1, 0};
		if (pthread_create(&j->th, NULL, run_job, j) != 0)
			return -1;
		return -2 - (njobs++ % 8);
	}
	pid_t pid = fork();
	if (pid == 0) {
		nap(ms);
		execl(self, self, "-do", op, p, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int reap(pid_t pid)
{
	if (pid <= -2) {
		struct job *j = &jobs[-2 - pid];
		pthread_join(j->th, NULL);
		return j->status;
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static const struct { unsigned bit; const char *name; } bits[] = {
	{IN_ACCESS, "ACCESS"}, {IN_MODIFY, "MODIFY"}, {IN_ATTRIB, "ATTRIB"},
	{IN_CLOSE_WRITE, "CLOSE_WRITE"}, {IN_CLOSE_NOWRITE, "CLOSE_NOWRITE"},
	{IN_OPEN, "OPEN"}, {IN_MOVED_FROM, "MOVED_FROM"}, {IN_MOVED_TO, "MOVED_TO"},
	{IN_CREATE, "CREATE"}, {IN_DELETE, "DELETE"}, {IN_DELETE_SELF, "DELETE_SELF"},
	{IN_MOVE_SELF, "MOVE_SELF"}, {IN_UNMOUNT, "UNMOUNT"}, {IN_Q_OVERFLOW, "Q_OVERFLOW"},
	{IN_IGNORED, "IGNORED"}, {IN_ISDIR, "ISDIR"},
};

/* The events seen, as "MASK name" strings, each once. */
struct seen {
	char ev[64][80];
	int n;
	unsigned cookie_from, cookie_to;
	int wd_of_last;
};

static void add(struct seen *s, const char *e)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->ev[i], e) == 0)
			return;
	if (s->n < 64)
		snprintf(s->ev[s->n++], sizeof s->ev[0], "%s", e);
}

static int cmp(const void *a, const void *b) { return strcmp(a, b); }

static void show(const char *label, struct seen *s)
{
	qsort(s->ev, s->n, sizeof s->ev[0], cmp);
	printf("%s:", label);
	for (int i = 0; i < s->n; i++)
		printf(" [%s]", s->ev[i]);
	printf("\n");
}

/* take parses the events in b[0:n] into s; it reports whether one had
 * every bit of until and name uname. */
static int take(struct seen *s, char *b, long n, unsigned until, const char *uname)
{
	int hit = 0;
	for (long off = 0; off + (long)sizeof(struct inotify_event) <= n;) {
		struct inotify_event *ev = (struct inotify_event *)(b + off);
		char e[80] = "";
		for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
			if (ev->mask & bits[i].bit) {
				strcat(e, e[0] ? "|" : "");
				strcat(e, bits[i].name);
			}
		const char *name = ev->len ? ev->name : "-";
		strcat(e, " ");
		strncat(e, name, 40);
		add(s, e);
		if (ev->mask & IN_MOVED_FROM)
			s->cookie_from = ev->cookie;
		if (ev->mask & IN_MOVED_TO)
			s->cookie_to = ev->cookie;
		s->wd_of_last = ev->wd;
		if ((ev->mask & until) == until && strcmp(name, uname) == 0)
			hit = 1;
		off += sizeof(struct inotify_event) + ev->len;
	}
	return hit;
}

/* collect reads fd's events (waiting in poll) until one with every bit
 * of until and name uname came, then for settle ms more; at most ms in
 * all. It reports whether that event came. */
static int collect(int fd, struct seen *s, unsigned until, const char *uname, long ms, long settle)
{
	char b[4096] __attribute__((aligned(8)));
	long end = now_ms() + ms, stop = -1;
	int hit = 0;
	for (;;) {
		long t = now_ms(), left = (stop >= 0 ? stop : end) - t;
		if (left <= 0)
			return hit;
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		long n = read(fd, b, sizeof b);
		if (n <= 0)
			continue;
		if (take(s, b, n, until, uname) && !hit) {
			hit = 1;
			stop = now_ms() + settle;
		}
	}
}

static void rmtree(const char *d)
{
	struct stat st;
	if (lstat(d, &st) != 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlink(d);
		return;
	}
	chmod(d, 0755);
	DIR *dp = opendir(d);
	struct dirent *de;
	while (dp && (de = readdir(dp)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char sub[1024];
		snprintf(sub, sizeof sub, "%s/%s", d, de->d_name);
		rmtree(sub);
	}
	if (dp)
		closedir(dp);
	rmdir(d);
}

/* A file written and closed before the first watch of the run: none of
 * it is the watch's, not even when kbox writes it back later (its
 * flusher's round, 2 s on). */
/* put makes file p, writes a byte to it and closes it. */
static void put(const char *p)
{
	int wf = open(p, O_CREAT | O_WRONLY, 0644);
	write(wf, "x", 1);
	close(wf);
}

static void before_cases(void)
{
	put(at("pre"));
	/* And two files written in a directory watched after. */
	mkdir(at("pred"), 0755);
	put(at("pred/f"));
	put(at("pred/g"));
	int fd = inotify_init1(IN_NONBLOCK);
	/* And files written in a directory after the inotify fd is made,
	 * before its watch. */
	mkdir(at("pree"), 0755);
	put(at("pree/f"));
	put(at("pree/g"));
	inotify_add_watch(fd, at("pre"), IN_ALL_EVENTS);
	int dwd = inotify_add_watch(fd, at("pred"), IN_ALL_EVENTS);
	int ewd = inotify_add_watch(fd, at("pree"), IN_ALL_EVENTS);
	/* Its fdinfo: the flags, and a line per watch */
	char p[64], line[512];
	snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd);
	FILE *fi = fopen(p, "r");
	unsigned flags = 0, wd = 0, mask = 0;
	int watches = 0;
	while (fi && fgets(line, sizeof line, fi)) {
		sscanf(line, "flags: %o", &flags);
		if (sscanf(line, "inotify wd:%u ino:%*x sdev:%*x mask:%x", &wd, &mask) == 2)
			watches++;
	}
	if (fi)
		fclose(fi);
	printf("fdinfo flags %o watches %d wd %u mask %x\n", flags, watches, wd, mask);
	nap(2200);
	chmod(at("pre"), 0600);
	char b[4096] __attribute__((aligned(8)));
	long n = read(fd, b, sizeof b);
	printf("before the watch %s:", en(n));
	for (long i = 0; i + (long)sizeof(struct inotify_event) <= n;) {
		struct inotify_event *ev = (struct inotify_event *)(b + i);
		printf(" %s%x", ev->wd == dwd ? "dir:" : ev->wd == ewd ? "dir2:" : "", ev->mask);
		i += sizeof(*ev) + ev->len;
	}
	printf("\n");
	close(fd);
}

static void flags_cases(void)
{
	errno = 0;
	printf("init1 bad flags %s\n", en(inotify_init1(0x4)));
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	printf("init1 nonblock|cloexec %s nonblock %d cloexec %d\n", en(fd),
	       fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0, fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
	char b[512];
	long n = read(fd, b, sizeof b);
	printf("nonblock read empty %s\n", en(n));
	close(fd);
	fd = inotify_init1(0);
	printf("init1 0 %s nonblock %d cloexec %d\n", en(fd),
	       fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0, fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
	close(fd);
#ifdef SYS_inotify_init
	fd = syscall(SYS_inotify_init);
	printf("inotify_init %s\n", en(fd));
	close(fd);
#else
	printf("inotify_init ok\n");
#endif
}

static void watch_cases(void)
{
	int fd = inotify_init1(IN_NONBLOCK);
	mkdir(at("w"), 0755);
	close(open(at("w/file"), O_WRONLY | O_CREAT, 0644));
	symlink("file", at("w/link"));
	int wfile = inotify_add_watch(fd, at("w/file"), IN_MODIFY);
	int wlink = inotify_add_watch(fd, at("w/link"), IN_MODIFY);
	int wnof = inotify_add_watch(fd, at("w/link"), IN_MODIFY | IN_DONT_FOLLOW);
	printf("watch file %s link same %d dont_follow differs %d\n", en(wfile), wlink == wfile, wnof > 0 && wnof != wfile);
	char cwd[600];
	getcwd(cwd, sizeof cwd);
	chdir(at("w"));
	int wrel = inotify_add_watch(fd, "file", IN_MODIFY);
	int wdot = inotify_add_watch(fd, ".", IN_CREATE);
	chdir(cwd);
	int wdir = inotify_add_watch(fd, at("w"), IN_CREATE);
	printf("relative same %d dot same %d\n", wrel == wfile, wdot == wdir && wdir > 0);
	printf("mask_add same %d\n", inotify_add_watch(fd, at("w/file"), IN_ATTRIB | IN_MASK_ADD) == wfile);
	printf("onlydir dir %s file %s\n", en(inotify_add_watch(fd, at("w"), IN_CREATE | IN_ONLYDIR)),
	       en(inotify_add_watch(fd, at("w/file"), IN_CREATE | IN_ONLYDIR)));
	printf("mask_create existing %s\n", en(inotify_add_watch(fd, at("w/file"), IN_CREATE | IN_MASK_CREATE)));
	printf("missing %s\n", en(inotify_add_watch(fd, at("w/none"), IN_CREATE)));
	printf("under a file %s\n", en(inotify_add_watch(fd, at("w/file/x"), IN_CREATE)));
	printf("empty path %s\n", en(inotify_add_watch(fd, "", IN_CREATE)));
	printf("mask 0 %s\n", en(inotify_add_watch(fd, at("w"), 0)));
	printf("mask only flags %s\n", en(inotify_add_watch(fd, at("w"), IN_ONLYDIR | IN_DONT_FOLLOW)));
	printf("mask_add|mask_create %s\n", en(inotify_add_watch(fd, at("w"), IN_CREATE | IN_MASK_ADD | IN_MASK_CREATE)));
	printf("bad fd %s closed fd %s\n", en(inotify_add_watch(-1, at("w"), IN_CREATE)),
	       en(inotify_add_watch(900, at("w"), IN_CREATE)));
	int p[2];
	pipe(p);
	int reg = open(at("w/file"), O_RDONLY);
	printf("pipe fd %s file fd %s\n", en(inotify_add_watch(p[0], at("w"), IN_CREATE)),
	       en(inotify_add_watch(reg, at("w"), IN_CREATE)));
	printf("rm_watch unknown %s pipe %s bad fd %s\n", en(inotify_rm_watch(fd, 4242)), en(inotify_rm_watch(p[0], 1)),
	       en(inotify_rm_watch(-1, 1)));
	close(p[0]);
	close(p[1]);
	close(reg);
	/* EACCES: a directory its owner cannot read, watched by a user
	 * without CAP_DAC_OVERRIDE. */
	mkdir(at("w/closed"), 0);
	chmod(at("w/closed"), 0);
	if (oneproc) {
		printf("unreadable dir EACCES skipped\n");
		goto rm;
	}
	pid_t pid = fork();
	if (pid == 0) {
		if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
			_exit(3);
		int r = inotify_add_watch(fd, at("w/closed"), IN_CREATE);
		_exit(r < 0 && errno == EACCES ? 0 : r < 0 ? 2 : 1);
	}
	printf("unreadable dir EACCES %d\n", reap(pid) == 0);
rm:;
	/* rm_watch: then IN_IGNORED */
	struct seen s = {0};
	printf("rm_watch %s\n", en(inotify_rm_watch(fd, wdir)));
	collect(fd, &s, IN_IGNORED, "-", 3000, 0);
	printf("ignored same wd %d\n", s.wd_of_last == wdir);
	show("rm_watch events", &s);
	printf("rm_watch again %s\n", en(inotify_rm_watch(fd, wdir)));
	close(fd);
}

/* Which of a set of fds readiness reports: "pipe", "inotify", both, none. */
static const char *which(int pipe_ready, int in_ready)
{
	return pipe_ready && in_ready ? "both" : pipe_ready ? "pipe" : in_ready ? "inotify" : "none";
}

static void event_cases(void)
{
	const unsigned mask = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE |
			      IN_DELETE_SELF | IN_ATTRIB;
	int fd = inotify_init1(IN_NONBLOCK);
	mkdir(at("e"), 0755);
	int wd = inotify_add_watch(fd, at("e"), mask);
	struct seen s = {0};

	/* This process writes a new file. */
	int f = open(at("e/mine"), O_WRONLY | O_CREAT, 0644);
	write(f, "hello\n", 6);
	close(f);
	printf("own write close_write %d\n", collect(fd, &s, IN_CLOSE_WRITE, "mine", 10000, 300));
	show("own write", &s);

	/* Another process creates and appends. */
	memset(&s, 0, sizeof s);
	pid_t pid = other(0, "create", at("e/theirs"));
	int came = collect(fd, &s, IN_CLOSE_WRITE, "theirs", 10000, 300);
	printf("other write close_write %d status %d\n", came, reap(pid));
	show("other write", &s);

	/* rename: one cookie */
	memset(&s, 0, sizeof s);
	rename(at("e/mine"), at("e/renamed"));
	printf("rename moved_to %d\n", collect(fd, &s, IN_MOVED_TO, "renamed", 3000, 100));
	printf("rename cookie same %d nonzero %d\n", s.cookie_from == s.cookie_to, s.cookie_from != 0);
	show("rename", &s);

	/* mkdir by another process */
	memset(&s, 0, sizeof s);
	pid = other(0, "mkdir", at("e/sub"));
	came = collect(fd, &s, IN_CREATE | IN_ISDIR, "sub", 3000, 100);
	printf("other mkdir %d status %d\n", came, reap(pid));
	show("mkdir", &s);

	/* removal: the directory's IN_DELETE, the file's own IN_DELETE_SELF */
	memset(&s, 0, sizeof s);
	int wself = inotify_add_watch(fd, at("e/renamed"), IN_DELETE_SELF);
	pid = other(0, "unlink", at("e/renamed"));
	came = collect(fd, &s, IN_IGNORED, "-", 3000, 200);
	printf("unlink ignored %d status %d self wd %d\n", came, reap(pid), wself > 0 && wself != wd);
	show("unlink", &s);

	/* IN_ONESHOT: one event, then the watch is gone */
	int fd1 = inotify_init1(IN_NONBLOCK);
	mkdir(at("o"), 0755);
	int wo = inotify_add_watch(fd1, at("o"), IN_CREATE | IN_ONESHOT);
	close(open(at("o/a"), O_WRONLY | O_CREAT, 0644));
	close(open(at("o/b"), O_WRONLY | O_CREAT, 0644));
	memset(&s, 0, sizeof s);
	collect(fd1, &s, IN_IGNORED, "-", 3000, 300);
	show("oneshot", &s);
	printf("oneshot rm_watch after %s\n", en(inotify_rm_watch(fd1, wo)));
	close(fd1);
	close(fd);
}

/* Events queue as Linux queues them: those of several calls come in one
 * read, in order, each whole; the same event twice in a row, unread, is
 * merged; a read of one event's size takes one; a non-blocking read right
 * after a call finds its event. */
static void batch_cases(void)
{
	mkdir(at("b"), 0755);
	int fd = inotify_init1(IN_NONBLOCK);
	inotify_add_watch(fd, at("b"), IN_CREATE | IN_DELETE | IN_ATTRIB | IN_MOVE);
	char b[4096] __attribute__((aligned(8)));
	mkdir(at("b/d1"), 0755);
	long n = read(fd, b, sizeof b);
	printf("batch at once %s\n", en(n));
	mkdir(at("b/d2"), 0755);
	chmod(at("b/d2"), 0700);
	chmod(at("b/d2"), 0700);
	rename(at("b/d2"), at("b/d3"));
	rmdir(at("b/d3"));
	rmdir(at("b/d1"));
	int q = -1;
	ioctl(fd, FIONREAD, &q);
	n = read(fd, b, sizeof b);
	printf("batch fionread %d read %s:", q, en(n));
	for (long i = 0; i + (long)sizeof(struct inotify_event) <= n;) {
		struct inotify_event *ev = (struct inotify_event *)(b + i);
		printf(" %x/%s", ev->mask, ev->len ? ev->name : "-");
		i += sizeof(*ev) + ev->len;
	}
	printf("\n");
	/* Reads of one bare event's size (the watched directory's own
	 * events) take one each. */
	int w = inotify_add_watch(fd, at("b"), IN_ATTRIB | IN_MOVE_SELF | IN_MASK_ADD);
	chmod(at("b"), 0700);
	rename(at("b"), at("bb"));
	rename(at("bb"), at("b"));
	struct inotify_event e1, e2;
	long n1 = read(fd, &e1, sizeof e1);
	long n2 = read(fd, &e2, sizeof e2);
	printf("bare reads %s %x %s %x wd same %d then %s\n", en(n1), e1.mask, en(n2), e2.mask,
	       (int)e1.wd == w && e2.wd == e1.wd, en(read(fd, b, sizeof b)));
	close(fd);
}

static void wait_cases(void)
{
	mkdir(at("r"), 0755);
	/* A blocking read, woken by another process's create. */
	int fd = inotify_init1(0);
	inotify_add_watch(fd, at("r"), IN_CREATE);
	pid_t pid = other(200, "create", at("r/woke"));
	char b[4096] __attribute__((aligned(8)));
	long t0 = now_ms();
	long n = read(fd, b, sizeof b);
	struct inotify_event *ev = (struct inotify_event *)b;
	printf("blocking read %s waited %d create %d name %s len %u\n", en(n), now_ms() - t0 >= 100,
	       n > 0 && (ev->mask & IN_CREATE) != 0, n > 0 ? ev->name : "-", n > 0 ? ev->len : 0);
	reap(pid);
	close(fd);

	/* epoll with a pipe and the inotify fd in one set */
	int in = inotify_init1(IN_NONBLOCK), p[2];
	pipe(p);
	inotify_add_watch(in, at("r"), IN_CREATE | IN_DELETE);
	int ep = epoll_create1(0);
	struct epoll_event e1 = {.events = EPOLLIN, .data.fd = p[0]}, e2 = {.events = EPOLLIN, .data.fd = in};
	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e1);
	epoll_ctl(ep, EPOLL_CTL_ADD, in, &e2);
	struct epoll_event out[4];
	printf("epoll idle %d\n", epoll_wait(ep, out, 4, 50));
	write(p[1], "p", 1);
	int k = epoll_wait(ep, out, 4, 3000);
	printf("epoll after pipe write %d %s\n", k, which(k >= 1 && out[0].data.fd == p[0], k >= 1 && out[0].data.fd == in));
	read(p[0], b, 1);
	pid = other(100, "create", at("r/ep"));
	k = epoll_wait(ep, out, 4, 5000);
	printf("epoll after create %d %s\n", k, which(k >= 1 && out[0].data.fd == p[0], k >= 1 && out[0].data.fd == in));
	reap(pid);
	/* FIONREAD: the bytes of the one event queued */
	int q = -1;
	ioctl(in, FIONREAD, &q);
	printf("fionread %d\n", q);
	n = read(in, b, sizeof b);
	printf("epoll read %s name %s\n", en(n), n > 0 ? ((struct inotify_event *)b)->name : "-");
	printf("nonblock drained %s\n", en(read(in, b, sizeof b)));

	/* select */
	pid = other(100, "unlink", at("r/ep"));
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	FD_SET(in, &rs);
	struct timeval tv = {5, 0};
	k = select((p[0] > in ? p[0] : in) + 1, &rs, NULL, NULL, &tv);
	printf("select %d %s\n", k, which(FD_ISSET(p[0], &rs), FD_ISSET(in, &rs)));
	reap(pid);
	n = read(in, b, sizeof b);
	ev = (struct inotify_event *)b;
	printf("select read delete %d name %s\n", n > 0 && (ev->mask & IN_DELETE) != 0, n > 0 ? ev->name : "-");

	/* poll: nothing at first, then the create */
	struct pollfd pf[2] = {{p[0], POLLIN, 0}, {in, POLLIN, 0}};
	printf("poll idle %d\n", poll(pf, 2, 0));
	pid = other(100, "create", at("r/polled"));
	k = poll(pf, 2, 5000);
	printf("poll %d pipe %d inotify %d\n", k, pf[0].revents, pf[1].revents);
	reap(pid);
	close(ep);
	close(in);
	close(p[0]);
	close(p[1]);
}

int main(int argc, char **argv)
{
	self = argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "-do") == 0)
		return do_op(argv[2], argv[3]);
	if (argc == 3 && strcmp(argv[1], "-oneproc") == 0) {
		oneproc = 1;
		argv++;
		argc--;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: inotifyt [-oneproc] DIR | inotifyt -do create|append|mkdir|unlink|watch PATH\n");
		return 2;
	}
	snprintf(dir, sizeof dir, "%s", argv[1]);
	rmtree(dir);
	if (mkdir(dir, 0755) != 0) {
		perror("mkdir");
		return 1;
	}
	before_cases();
	flags_cases();
	watch_cases();
	event_cases();
	batch_cases();
	wait_cases();
	rmtree(dir);
	printf("inotifyt done\n");
	return 0;
}
