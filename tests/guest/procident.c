/*
 * procident: a process's identity in /proc, one line per check. Run as
 * root; every line is the same natively and under kbox unless said.
 *
 *   procident oom [nocap]
 *                     /proc/PID/oom_score_adj and oom_adj: reads, writes
 *                     in and out of range, badly formed, as root (with
 *                     CAP_SYS_RESOURCE it may lower them) and as nobody
 *                     (may raise, may lower back to the last value root
 *                     set, not below; oom_adj not below the current
 *                     value), inherited across fork and exec, another
 *                     process's (a child's), stat and access. With nocap
 *                     root first drops CAP_SYS_RESOURCE: a host root
 *                     without it (a container's) prints the same lines
 *   procident oomself [nocap]
 *                     the same without a child (every tier)
 *   procident comm    writes to /proc/self/comm (and a thread's): comm,
 *                     status Name:, stat's comm and PR_GET_NAME follow
 *   procident commchild
 *                     a child's comm is EINVAL to write
 *   procident list    every process /proc lists: comm, cmdline, Name:,
 *                     PPid: (-2 for this process's own parent, when it
 *                     is not 0)
 *   procident exec    forks a child that execs this program with a known
 *                     argv: the parent reads the child's cmdline, comm,
 *                     stat, status and exe by pid, the child its own by
 *                     self and by pid
 *   procident self    execs itself with a known argv (no fork: every
 *                     tier) and reads its own entries by self and by pid
 *   procident ppid    getppid() against stat's and status's parent; prints
 *                     "ppid: 0" or "ppid: a process" (kbox: 0, as for a
 *                     namespace's first process; natively: a process)
 *   procident ids     takes real, effective and saved uids 1000, 1001,
 *                     1002 (gids the same) and groups 1000 and 1003, stays
 *                     dumpable, and prints its status's Uid:, Gid: and
 *                     Groups: lines and the owner of its /proc entries
 *                     (the effective ids), by self, by pid and by thread
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static const char *self_path;

/* en names errno value e, "ok" for 0. */
static const char *en(int e) { return e ? errname(e) : "ok"; }

/* slurp reads a whole file (at most n-1 bytes); the length, or -errno. */
static ssize_t slurp(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fd, buf + got, n - 1 - got);
		if (r < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	return (ssize_t)got;
}

/* put writes text to path in one write; "ok" or the errno. */
static const char *put(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return en(errno);
	ssize_t r = write(fd, text, len);
	int e = errno;
	close(fd);
	if (r < 0)
		return en(e);
	static char b[32];
	if ((size_t)r != len) {
		snprintf(b, sizeof b, "short %zd", r);
		return b;
	}
	return "ok";
}

static void oom_put(const char *who, const char *file, const char *text)
{
	char path[64], show[32];
	snprintf(path, sizeof path, "/proc/%s/%s", who, file);
	size_t i = 0;
	for (const char *p = text; *p && i < sizeof show - 2; p++)
		show[i++] = *p == '\n' ? '|' : *p;
	show[i] = 0;
	printf("write %s %s \"%s\": %s\n", who[0] == 's' ? "self" : "child", file, show, put(path, text, strlen(text)));
}

static void oom_show(const char *who, const char *label)
{
	char path[64], a[32] = "", b[32] = "";
	snprintf(path, sizeof path, "/proc/%s/oom_score_adj", who);
	ssize_t r1 = slurp(path, a, sizeof a);
	snprintf(path, sizeof path, "/proc/%s/oom_adj", who);
	ssize_t r2 = slurp(path, b, sizeof b);
	a[strcspn(a, "\n")] = 0;
	b[strcspn(b, "\n")] = 0;
	printf("%s: oom_score_adj %s oom_adj %s\n", label, r1 < 0 ? en((int)-r1) : a, r2 < 0 ? en((int)-r2) : b);
}

static void become_nobody(void)
{
	if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) {
		printf("cannot become nobody: %s\n", strerror(errno));
		exit(1);
	}
	/* As for a process started as nobody: its /proc files are its own. */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

/* drop_sys_resource drops CAP_SYS_RESOURCE from the effective and
 * permitted sets. */
static void drop_sys_resource(void)
{
	struct { unsigned int version; int pid; } h = {0x20080522, 0}; /* _LINUX_CAPABILITY_VERSION_3 */
	struct { unsigned int effective, permitted, inheritable; } d[2];
	enum { CAP_SYS_RESOURCE = 24 };
	if (syscall(SYS_capget, &h, d) != 0) {
		printf("capget: %s\n", strerror(errno));
		exit(1);
	}
	d[0].effective &= ~(1u << CAP_SYS_RESOURCE);
	d[0].permitted &= ~(1u << CAP_SYS_RESOURCE);
	if (syscall(SYS_capset, &h, d) != 0) {
		printf("capset: %s\n", strerror(errno));
		exit(1);
	}
}

static void oom(int nocap)
{
	if (nocap)
		drop_sys_resource();
	oom_show("self", "start");
	/* Out of range, badly formed: EINVAL (ERANGE past int). */
	const char *bad[] = {"1001", "-1001", "abc", "", " ", "12x", "0x", "08", "-+5", "99999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		oom_put("self", "oom_score_adj", bad[i]);
	const char *badadj[] = {"16", "-18", "x"};
	for (size_t i = 0; i < sizeof badadj / sizeof badadj[0]; i++)
		oom_put("self", "oom_adj", badadj[i]);
	/* Well formed: a newline, spaces, a sign, hex and octal. */
	const char *good[] = {"-1000", "1000\n", "  +7 \n", "0x10", "010", "-0"};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		oom_put("self", "oom_score_adj", good[i]);
		oom_show("self", "after");
	}
	/* oom_adj scales: 15 is 1000, -17 is -1000, 8 is 470. */
	const char *adj[] = {"15", "-17", "8", "-16", "0"};
	for (size_t i = 0; i < sizeof adj / sizeof adj[0]; i++) {
		oom_put("self", "oom_adj", adj[i]);
		oom_show("self", "after");
	}
	/* What a write answers: the bytes taken, the rest ignored. */
	int fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
	ssize_t r = write(fd, "123\n456789012345678", 19);
	printf("long write: %zd\n", r);
	r = write(fd, "5\0" "99", 4);
	printf("write with a NUL: %zd\n", r);
	char buf[32] = "";
	r = pread(fd, buf, sizeof buf - 1, 0);
	printf("pread after: %zd %s", r, r > 0 ? buf : "\n");
	close(fd);
	/* One open, one fprintf: as LTP's library does it. */
	FILE *f = fopen("/proc/self/oom_score_adj", "w");
	int pr = f ? fprintf(f, "%d", -1000) : -1;
	int cl = f ? fclose(f) : -1;
	printf("fopen/fprintf/fclose: %s %s\n", pr > 0 ? "ok" : "fail", cl == 0 ? "ok" : en(errno));
	oom_show("self", "after fprintf");
	struct stat st;
	stat("/proc/self/oom_score_adj", &st);
	printf("mode %o\n", st.st_mode & 07777);
	printf("access W_OK %s\n", en(access("/proc/self/oom_score_adj", W_OK) ? errno : 0));
	/* writev: a write per segment. */
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	struct iovec iov[2] = {{"12", 2}, {"3", 1}};
	r = writev(fd, iov, 2);
	close(fd);
	printf("writev: %zd\n", r);
	oom_show("self", "after writev");
	fflush(stdout);
}

static void oom_fork(void)
{
	/* A child inherits; its writes are its own; the parent may write
	 * the child's. */
	oom_put("self", "oom_score_adj", "-500");
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		exit(1);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		oom_show("self", "child");
		oom_put("self", "oom_score_adj", "300");
		oom_show("self", "child");
		fflush(stdout);
		write(c2p[1], "w", 1);
		read(p2c[0], &c, 1);
		oom_show("self", "child after the parent's write");
		/* Dropped to nobody: raise, lower back, not below. */
		oom_put("self", "oom_score_adj", "100");
		become_nobody();
		printf("as nobody\n");
		oom_show("self", "nobody");
		oom_put("self", "oom_score_adj", "200");  /* up */
		oom_put("self", "oom_score_adj", "100");  /* back to root's last */
		oom_put("self", "oom_score_adj", "99");   /* below it */
		oom_put("self", "oom_score_adj", "-1000");
		oom_show("self", "nobody");
		oom_put("self", "oom_adj", "-9");  /* -529: below */
		oom_put("self", "oom_adj", "5");   /* 294: up */
		oom_put("self", "oom_adj", "2");   /* 117: above 100, below 294 */
		oom_put("self", "oom_score_adj", "117");
		oom_show("self", "nobody");
		printf("nobody access W_OK self %s\n", en(access("/proc/self/oom_score_adj", W_OK) ? errno : 0));
		char pp[64];
		snprintf(pp, sizeof pp, "/proc/%d/oom_score_adj", (int)getppid());
		printf("nobody opens root's for writing: %s\n", put(pp, "0", 1));
		fflush(stdout);
		/* Exec keeps it. */
		execl("/proc/self/exe", "procident", "oom-exec", (char *)NULL);
		printf("exec: %s\n", strerror(errno));
		_exit(1);
	}
	char c, cp[32];
	read(c2p[0], &c, 1);
	snprintf(cp, sizeof cp, "%d", (int)pid);
	oom_show("self", "parent");
	oom_show(cp, "the child's by pid");
	oom_put(cp, "oom_score_adj", "-900");
	oom_show(cp, "the child's by pid");
	fflush(stdout);
	write(p2c[1], "g", 1);
	int status;
	waitpid(pid, &status, 0);
	oom_show("self", "parent at the end");
}

static void name_of(const char *label, const char *dir)
{
	char path[96], comm[64] = "", stat[1024] = "", status[4096] = "", name[64] = "?";
	snprintf(path, sizeof path, "%s/comm", dir);
	slurp(path, comm, sizeof comm);
	comm[strcspn(comm, "\n")] = 0;
	snprintf(path, sizeof path, "%s/stat", dir);
	slurp(path, stat, sizeof stat);
	char *l = strchr(stat, '('), *r = strrchr(stat, ')');
	if (l && r && r > l)
		*r = 0;
	snprintf(path, sizeof path, "%s/status", dir);
	slurp(path, status, sizeof status);
	char *n = strstr(status, "Name:\t");
	if (n) {
		n += 6;
		snprintf(name, sizeof name, "%.*s", (int)strcspn(n, "\n"), n);
	}
	printf("%s: comm \"%s\" stat \"%s\" Name \"%s\"\n", label, comm, l ? l + 1 : "?", name);
}

static void *thread_main(void *arg)
{
	char path[64];
	(void)arg;
	snprintf(path, sizeof path, "/proc/self/task/%d", gettid());
	name_of("new thread", path);
	char p2[80];
	snprintf(p2, sizeof p2, "%s/comm", path);
	printf("thread writes its comm: %s\n", put(p2, "worker", 6));
	name_of("thread after", path);
	name_of("process after the thread's", "/proc/self");
	return NULL;
}

static void comm(void)
{
	char pr[17] = "";
	name_of("start", "/proc/self");
	printf("write comm: %s\n", put("/proc/self/comm", "renamed", 7));
	name_of("after", "/proc/self");
	prctl(PR_GET_NAME, pr, 0, 0, 0);
	printf("PR_GET_NAME \"%s\"\n", pr);
	printf("write comm (newline): %s\n", put("/proc/self/comm", "nl\n", 3));
	name_of("after", "/proc/self");
	printf("write comm (long): %s\n", put("/proc/self/comm", "abcdefghijklmnopqrstuvwxyz", 26));
	name_of("after", "/proc/self");
	prctl(PR_SET_NAME, "by-prctl", 0, 0, 0);
	name_of("after PR_SET_NAME", "/proc/self");
	pthread_t t;
	pthread_create(&t, NULL, thread_main, NULL);
	pthread_join(t, NULL);
	fflush(stdout);
}

static void comm_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	char cp[64];
	snprintf(cp, sizeof cp, "/proc/%d/comm", (int)pid);
	printf("write a child's comm: %s\n", put(cp, "other", 5));
	snprintf(cp, sizeof cp, "/proc/%d", (int)pid);
	name_of("child", cp);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* show_proc prints what dir (a process's /proc directory) says of it. */
static void show_proc(const char *label, const char *dir)
{
	char path[96], buf[4096];
	snprintf(path, sizeof path, "%s/cmdline", dir);
	ssize_t n = slurp(path, buf, sizeof buf);
	printf("%s cmdline:", label);
	for (ssize_t i = 0; i < n; i++)
		putchar(buf[i] ? buf[i] : '|');
	printf("\n");
	name_of(label, dir);
	snprintf(path, sizeof path, "%s/exe", dir);
	n = readlink(path, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	printf("%s exe: %s\n", label, n > 0 && strcmp(buf, self_path) == 0 ? "this program" : buf);
}

/* child runs after the exec: argv[0] is "idchild"; fd 10 tells the
 * parent it runs, fd 11 says the parent has read. */
static int child(int argc, char **argv)
{
	char c, dir[64];
	(void)argc;
	(void)argv;
	write(10, "r", 1);
	read(11, &c, 1);
	show_proc("child by self", "/proc/self");
	snprintf(dir, sizeof dir, "/proc/%d", (int)getpid());
	show_proc("child by pid", dir);
	return 0;
}

static void exec_(void)
{
	int c2p[2], p2c[2];
	if (pipe(c2p) || pipe(p2c))
		exit(1);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(c2p[1], 10);
		dup2(p2c[0], 11);
		char *argv[] = {"idchild", "two words", "", "x", NULL};
		execv(self_path, argv);
		_exit(127);
	}
	char c, dir[64];
	read(c2p[0], &c, 1);
	snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
	show_proc("parent reads the child", dir);
	fflush(stdout);
	write(p2c[1], "g", 1);
	int st;
	waitpid(pid, &st, 0);
	printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void self(int stage)
{
	if (stage == 0) {
		fflush(stdout);
		char *argv[] = {"selfexec", "one two", "", "three", NULL};
		execv(self_path, argv);
		printf("exec: %s\n", strerror(errno));
		exit(1);
	}
	char dir[64];
	show_proc("self", "/proc/self");
	snprintf(dir, sizeof dir, "/proc/%d", (int)getpid());
	show_proc("by pid", dir);
}

static long field_ppid(const char *path)
{
	char buf[1024];
	if (slurp(path, buf, sizeof buf) < 0)
		return -1;
	char *r = strrchr(buf, ')');
	char st;
	long ppid;
	if (!r || sscanf(r + 1, " %c %ld", &st, &ppid) != 2)
		return -1;
	return ppid;
}

static long status_ppid(const char *path)
{
	char buf[4096];
	if (slurp(path, buf, sizeof buf) < 0)
		return -1;
	char *p = strstr(buf, "\nPPid:");
	return p ? strtol(p + 6, NULL, 10) : -1;
}

static void ppid(void)
{
	long g = getppid(), s = field_ppid("/proc/self/stat"), t = status_ppid("/proc/self/status");
	printf("getppid, stat and status agree: %s\n", g == s && g == t ? "yes" : "no");
	if (g != s || g != t)
		printf("getppid %ld stat %ld status %ld\n", g, s, t);
	printf("ppid: %s\n", g == 0 ? "0" : "a process");
	/* A child's parent is this process, in every view. */
	fflush(stdout);
	long me = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		long cg = getppid(), cs = field_ppid("/proc/self/stat"), ct = status_ppid("/proc/self/status");
		printf("child's parent is its parent: %s\n", cg == me && cs == me && ct == me ? "yes" : "no");
		_exit(0);
	}
	waitpid(pid, NULL, 0);
}

/* owner prints the owner of path (lstat with nofollow) as label's. */
static void owner(const char *label, const char *path, int nofollow)
{
	struct stat st;
	if ((nofollow ? lstat(path, &st) : stat(path, &st)) != 0)
		printf("%s: %s\n", label, errname(errno));
	else
		printf("%s: %u %u\n", label, (unsigned)st.st_uid, (unsigned)st.st_gid);
}

static void ids(void)
{
	gid_t groups[] = {1000, 1003};
	if (setgroups(2, groups) || setresgid(1000, 1001, 1002) || setresuid(1000, 1001, 1002)) {
		printf("set ids: %s\n", strerror(errno));
		return;
	}
	prctl(PR_SET_DUMPABLE, 1); /* a change of ids made it undumpable: root's entries */
	char buf[8192], path[128];
	if (slurp("/proc/self/status", buf, sizeof buf) < 0) {
		printf("status: %s\n", strerror(errno));
		return;
	}
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
		if (!strncmp(l, "Uid:", 4) || !strncmp(l, "Gid:", 4) || !strncmp(l, "Groups:", 7))
			printf("%s\n", l);
	owner("self", "/proc/self", 0);
	owner("self/status", "/proc/self/status", 0);
	owner("self/stat", "/proc/self/stat", 0);
	owner("self/fd", "/proc/self/fd", 0);
	owner("self/fd/1 (link)", "/proc/self/fd/1", 1);
	owner("self/exe (link)", "/proc/self/exe", 1);
	owner("self/environ", "/proc/self/environ", 0);
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getpid());
	owner("PID/cmdline", path, 0);
	snprintf(path, sizeof path, "/proc/self/task/%ld", (long)syscall(SYS_gettid));
	owner("self/task/TID", path, 0);
	strcat(path, "/status");
	owner("self/task/TID/status", path, 0);
}

/* list prints every process /proc lists: its comm, cmdline, status
 * Name: and PPid:, the caller's own pid shown as "self". */
static void list(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	if (!d) {
		printf("opendir /proc: %s\n", strerror(errno));
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char dir[300], path[320], comm[64] = "", cmd[4096] = "", status[4096] = "";
		snprintf(dir, sizeof dir, "/proc/%s", e->d_name);
		snprintf(path, sizeof path, "%s/comm", dir);
		ssize_t c = slurp(path, comm, sizeof comm);
		comm[strcspn(comm, "\n")] = 0;
		snprintf(path, sizeof path, "%s/cmdline", dir);
		ssize_t n = slurp(path, cmd, sizeof cmd);
		for (ssize_t i = 0; i < n; i++)
			if (!cmd[i])
				cmd[i] = '|';
		snprintf(path, sizeof path, "%s/status", dir);
		ssize_t st = slurp(path, status, sizeof status);
		char *name = strstr(status, "Name:\t"), *pp = strstr(status, "\nPPid:\t");
		int ppid = pp ? atoi(pp + 7) : -1;
		const char *who = atoi(e->d_name) == getpid() ? "self" : e->d_name;
		printf("pid %s comm %s cmdline %s Name %.*s PPid %d%s\n", who, c < 0 ? en((int)-c) : comm,
		       n < 0 ? en((int)-n) : cmd, name ? (int)strcspn(name + 6, "\n") : 1, name ? name + 6 : "?",
		       ppid == getppid() && ppid != 0 ? -2 : ppid, st < 0 ? " (status unreadable)" : "");
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	self_path = getenv("PROCIDENT");
	if (!self_path)
		self_path = "/opt/tests/procident";
	if (strcmp(argv[0], "idchild") == 0)
		return child(argc, argv);
	if (strcmp(argv[0], "selfexec") == 0) {
		self(1);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: procident oom|oomself|comm|commchild|exec|self|ppid|ids|list\n");
		return 2;
	}
	int nocap = argc > 2 && strcmp(argv[2], "nocap") == 0;
	if (strcmp(argv[1], "oom") == 0) {
		oom(nocap);
		oom_fork();
	} else if (strcmp(argv[1], "oomself") == 0)
		oom(nocap);
	else if (strcmp(argv[1], "oom-exec") == 0)
		oom_show("self", "nobody after exec");
	else if (strcmp(argv[1], "comm") == 0)
		comm();
	else if (strcmp(argv[1], "commchild") == 0)
		comm_child();
	else if (strcmp(argv[1], "list") == 0)
		list();
	else if (strcmp(argv[1], "exec") == 0)
		exec_();
	else if (strcmp(argv[1], "self") == 0)
		self(0);
	else if (strcmp(argv[1], "ppid") == 0)
		ppid();
	else if (strcmp(argv[1], "ids") == 0)
		ids();
	else
		return 2;
	return 0;
}
