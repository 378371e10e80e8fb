/*
 * Syscalls of the signal, timer, scheduling and time families and the old
 * time setters, one line per check ("name result errno"). "sysmisc same"
 * prints what a native run prints too; "sysmisc kbox PID" prints what only
 * kbox answers (a host pid outside the guest is ESRCH for the calls that
 * name a task; inotify is absent). Never run "kbox" natively: it renices
 * the given pid and every process of the caller's uid. "sysmisc nofile"
 * raises the soft fd limit to the hard one, as servers and Python tools do
 * at start, sets other limits to their current values and lowers the core
 * limit to 0, with no fork (it runs in every tier), and prints what a
 * native run prints too. "sysmisc fsinfo" asks sysfs(2) and ustat(2) (x86_64)
 * what holds for any kernel: the types' names by index and back, their
 * errors, and ustat of /'s device; then it lists the types. "sysmisc
 * readahead DIR" tries readahead(2) on a file, a directory and an O_PATH
 * fd there. "sysmisc clonens" tries clone(2) with namespace flags (kbox
 * refuses them as it refuses unshare). "sysmisc entropy" compares the
 * entropy count of /dev/urandom (RNDGETENTCNT) with
 * /proc/sys/kernel/random/entropy_avail and prints the pool's size.
 * "sysmisc vhangup" calls vhangup(2) in children: after setsid (no
 * controlling terminal) and as uid 65534 (no CAP_SYS_TTY_CONFIG), as root.
 * "sysmisc vhangup-tty" calls it with a pty of its own as the controlling
 * terminal (never run it natively with a terminal of the user's: Linux
 * hangs it up).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>
#include "check.h"

static void same(void)
{
	alarm(10); /* a timer that never fires must not hang the test */
	sigset_t set, pend;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	raise(SIGUSR1);
	int r = sigpending(&pend);
	printf("sigpending %s member=%d\n", outcome(r), sigismember(&pend, SIGUSR1));
	siginfo_t si;
	struct timespec ts = {0, 0};
	r = sigtimedwait(&set, &si, &ts);
	printf("sigtimedwait %s signo=%d\n", outcome(r), r == SIGUSR1);

	/* raw: musl's wrappers answer ENOSYS themselves */
	r = syscall(SYS_sched_getscheduler, 0);
	printf("sched_getscheduler %s policy=%d\n", outcome(r), r);
	struct sched_param sp = {0};
	printf("sched_setscheduler %s\n", outcome(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &sp)));
	printf("sched_getparam %s\n", outcome(syscall(SYS_sched_getparam, 0, &sp)));
	struct timespec rr;
	printf("sched_rr_get_interval %s\n", outcome(sched_rr_get_interval(0, &rr)));
	errno = 0;
	int prio = getpriority(PRIO_PROCESS, 0);
	printf("getpriority %s\n", prio == -1 && errno ? outcome(-1) : "ok");
	printf("getpgid %s\n", outcome(getpgid(0) >= 0 ? 0 : -1));

	timer_t tm;
	struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
	r = timer_create(CLOCK_MONOTONIC, &sev, &tm);
	printf("timer_create %s\n", outcome(r));
	struct itimerspec its = {.it_value = {0, 20 * 1000 * 1000}};
	printf("timer_settime %s\n", outcome(timer_settime(tm, 0, &its, NULL)));
	int sig = 0;
	printf("sigwait %d\n", sigwait(&set, &sig) == 0 && sig == SIGUSR1);
	printf("timer_delete %s\n", outcome(timer_delete(tm)));

	const char *f = "sysmisc.tmp";
	int fd = open(f, O_RDWR | O_CREAT | O_TRUNC, 0644);
	struct utimbuf ub = {.actime = 1000, .modtime = 2000};
	r = utime(f, &ub);
	struct stat st;
	stat(f, &st);
	printf("utime %s %ld %ld\n", outcome(r), (long)st.st_atime, (long)st.st_mtime);
	struct timeval tv[2] = {{3000, 5}, {4000, 7}};
	r = utimes(f, tv);
	stat(f, &st);
	printf("utimes %s %ld %ld %ld\n", outcome(r), (long)st.st_atime, (long)st.st_mtime, st.st_mtim.tv_nsec);
	tv[0].tv_usec = 2000000;
	printf("utimes bad usec %s\n", outcome(utimes(f, tv)));
	printf("write %s\n", outcome(write(fd, "data", 4) == 4 ? 0 : -1));
	printf("syncfs %s\n", outcome(syncfs(fd)));
	printf("sync_file_range %s\n", outcome(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)));
	printf("readahead %s\n", outcome(readahead(fd, 0, 4096)));
	close(fd);

	/* a negative pid names no task: EINVAL for the sched_* calls */
	printf("sched_rr_get_interval -1 %s\n", outcome(syscall(SYS_sched_rr_get_interval, -1, &rr)));
	printf("sched_getparam -1 %s\n", outcome(syscall(SYS_sched_getparam, -1, &sp)));
	printf("sched_setscheduler -1 %s\n", outcome(syscall(SYS_sched_setscheduler, -1, SCHED_OTHER, &sp)));

	/* sysinfo's uptime is /proc/uptime's; a pid is within pid_max */
	struct sysinfo sinfo;
	sysinfo(&sinfo);
	double up = 0;
	FILE *u = fopen("/proc/uptime", "r");
	if (u) {
		if (fscanf(u, "%lf", &up) != 1)
			up = 0;
		fclose(u);
	}
	printf("sysinfo uptime agrees %d\n", sinfo.uptime >= (long)up - 2 && sinfo.uptime <= (long)up + 2);
	long pidmax = 0;
	FILE *pm = fopen("/proc/sys/kernel/pid_max", "r");
	if (pm) {
		if (fscanf(pm, "%ld", &pidmax) != 1)
			pidmax = 0;
		fclose(pm);
	}
	printf("pid within pid_max %d\n", getpid() <= pidmax);

	/* a soft limit above the hard one */
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	struct rlimit bad = {rl.rlim_max + 1, rl.rlim_max};
	if (rl.rlim_max != RLIM_INFINITY)
		printf("setrlimit cur>max %s\n", outcome(setrlimit(RLIMIT_NOFILE, &bad)));

	/* truncate beyond RLIMIT_FSIZE: SIGXFSZ and EFBIG */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit fs0, fs1;
	getrlimit(RLIMIT_FSIZE, &fs0);
	fs1 = fs0;
	fs1.rlim_cur = 8192;
	setrlimit(RLIMIT_FSIZE, &fs1);
	printf("truncate beyond RLIMIT_FSIZE %s\n", outcome(truncate(f, 16384)));
	printf("truncate within RLIMIT_FSIZE %s\n", outcome(truncate(f, 4096)));
	setrlimit(RLIMIT_FSIZE, &fs0);
	unlink(f);

	/* SCHED_FIFO needs CAP_SYS_NICE or RLIMIT_RTPRIO */
	pid_t c = fork();
	if (c == 0) {
		struct rlimit rt = {0, 0};
		setrlimit(RLIMIT_RTPRIO, &rt);
		if (setgid(65534) || setuid(65534)) {
			printf("sched_setscheduler FIFO unprivileged skip\n");
			_exit(0);
		}
		struct sched_param fp = {.sched_priority = 1};
		printf("sched_setscheduler FIFO unprivileged %s\n", outcome(syscall(SYS_sched_setscheduler, 0, SCHED_FIFO, &fp)));
		_exit(0);
	}
	waitpid(c, NULL, 0);

	/* sync_file_range's arguments (LTP sync_file_range01): EINVAL
	 * before anything is written */
	int sf = open("sfr", O_CREAT | O_RDWR | O_TRUNC, 0644);
	write(sf, "data", 4);
	printf("sync_file_range %s\n", outcome(sync_file_range(sf, 0, 4, SYNC_FILE_RANGE_WRITE)));
	printf("sync_file_range offset -1 %s\n", outcome(sync_file_range(sf, -1, 1, SYNC_FILE_RANGE_WAIT_BEFORE)));
	printf("sync_file_range nbytes -1 %s\n", outcome(sync_file_range(sf, 0, -1, SYNC_FILE_RANGE_WRITE)));
	printf("sync_file_range flags 8 %s\n", outcome(sync_file_range(sf, 0, 1, 8)));
	printf("sync_file_range to the end %s\n", outcome(sync_file_range(sf, 1, 0, SYNC_FILE_RANGE_WAIT_AFTER)));
	close(sf);
	unlink("sfr");
	/* the caller's own robust list (LTP get_robust_list01) */
	void *head = NULL;
	size_t hlen = 0;
	printf("get_robust_list self %s\n", outcome(syscall(SYS_get_robust_list, 0, &head, &hlen)));
	printf("get_robust_list self len %zu head set %d\n", hlen, head != NULL);
	printf("get_robust_list own tid %s\n", outcome(syscall(SYS_get_robust_list, (int)syscall(SYS_gettid), &head, &hlen)));
	printf("get_robust_list bad head %s\n", outcome(syscall(SYS_get_robust_list, 0, (void *)8, &hlen)));
#ifdef SYS__sysctl
	/* removed in Linux 5.5: ENOSYS (LTP sysctl01, sysctl03, sysctl04 TCONF) */
	printf("_sysctl %s\n", outcome(syscall(SYS__sysctl, NULL)));
#endif
}

static void kboxonly(int host)
{
	struct sched_param sp;
	printf("sched_getparam host %s\n", outcome(syscall(SYS_sched_getparam, host, &sp)));
	printf("sched_getscheduler host %s\n", outcome(syscall(SYS_sched_getscheduler, host)));
	errno = 0;
	getpriority(PRIO_PROCESS, host);
	printf("getpriority host %s\n", errno ? outcome(-1) : "ok");
	printf("setpriority host %s\n", outcome(setpriority(PRIO_PROCESS, host, 10)));
	printf("setpriority user %s\n", outcome(setpriority(PRIO_USER, 0, 10)));
	printf("getpgid host %s\n", outcome(getpgid(host)));
	printf("getsid host %s\n", outcome(getsid(host)));
	void *rh;
	size_t rlen;
	printf("get_robust_list host %s\n", outcome(syscall(SYS_get_robust_list, host, &rh, &rlen)));
	cpu_set_t cs;
	printf("sched_getaffinity host %s\n", outcome(sched_getaffinity(host, sizeof cs, &cs)));
	struct rlimit rl;
	printf("prlimit host %s\n", outcome(prlimit(host, RLIMIT_NOFILE, NULL, &rl)));
	/* the first guest process's parent (kbox's keeper) is outside: 0 */
	printf("getppid %d\n", (int)getppid());
	printf("inotify_init1 %s\n", outcome(inotify_init1(0)));
	struct sysinfo si;
	sysinfo(&si);
	printf("sysinfo procs<10 %d ram %d\n", si.procs < 10, si.totalram > 0);
}

static void nofile(void)
{
	struct rlimit rl, got, pr;
	getrlimit(RLIMIT_NOFILE, &rl);
	struct rlimit up = {rl.rlim_max, rl.rlim_max};
	printf("soft to hard %s\n", outcome(setrlimit(RLIMIT_NOFILE, &up)));
	getrlimit(RLIMIT_NOFILE, &got);
	printf("soft is hard %d\n", got.rlim_cur == got.rlim_max);
	printf("prlimit read %s\n", outcome(prlimit(0, RLIMIT_NOFILE, NULL, &pr)));
	printf("prlimit agrees %d\n", pr.rlim_cur == got.rlim_cur && pr.rlim_max == got.rlim_max);
	struct rlimit low = {got.rlim_cur / 2, got.rlim_max};
	printf("soft lowered %s\n", outcome(prlimit(0, RLIMIT_NOFILE, &low, NULL)));
	printf("soft raised again %s\n", outcome(setrlimit(RLIMIT_NOFILE, &got)));
	/* Other limits set to what they are, as Python's resource tests do:
	 * in the in-process tiers they are kbox's process's, kept as they
	 * are, and a set that changes nothing succeeds. */
	static const int kept[] = {RLIMIT_STACK, RLIMIT_CORE, RLIMIT_FSIZE, RLIMIT_AS, RLIMIT_CPU};
	for (unsigned i = 0; i < sizeof kept / sizeof kept[0]; i++) {
		struct rlimit cur, old = {0, 0};
		getrlimit(kept[i], &cur);
		printf("limit %d set to itself %s", kept[i], outcome(setrlimit(kept[i], &cur)));
		printf(", by prlimit %s", outcome(prlimit(0, kept[i], &cur, &old)));
		printf(", old %d\n", old.rlim_cur == cur.rlim_cur && old.rlim_max == cur.rlim_max);
	}
	struct rlimit core, inverted = {RLIM_INFINITY, 0};
	getrlimit(RLIMIT_CORE, &core);
	printf("limit soft>hard %s\n", outcome(prlimit(0, RLIMIT_CORE, &inverted, NULL)));
	printf("limit unknown %s\n", outcome(prlimit(0, 99, &core, NULL)));
	printf("limit bad pointer %s\n", outcome(syscall(SYS_setrlimit, RLIMIT_CORE, (void *)8)));
	/* No core dumps, as programs that hold secrets ask. */
	struct rlimit nocore = {0, 0};
	printf("core limit lowered %s", outcome(setrlimit(RLIMIT_CORE, &nocore)));
	getrlimit(RLIMIT_CORE, &core);
	printf(", now %lu %lu\n", (unsigned long)core.rlim_cur, (unsigned long)core.rlim_max);
}

#ifdef SYS_sysfs
static void fsinfo(void)
{
	long n = syscall(SYS_sysfs, 3);
	printf("sysfs count %s\n", n > 0 ? "ok" : outcome(n));
	int round = 1;
	char names[4096] = "", name[256];
	for (long i = 0; i < n; i++) {
		if (syscall(SYS_sysfs, 2, i, name) < 0 || syscall(SYS_sysfs, 1, name) != i)
			round = 0;
		else if (strlen(names) + strlen(name) + 2 < sizeof names)
			strcat(strcat(names, name), " ");
	}
	printf("sysfs roundtrip %d\n", round);
	printf("sysfs unknown %s\n", outcome(syscall(SYS_sysfs, 1, "nosuchfs")));
	printf("sysfs past end %s\n", outcome(syscall(SYS_sysfs, 2, n, name)));
	printf("sysfs option 4 %s\n", outcome(syscall(SYS_sysfs, 4)));
	printf("sysfs bad name %s\n", outcome(syscall(SYS_sysfs, 1, (char *)8)));
	printf("sysfs bad buffer %s\n", outcome(syscall(SYS_sysfs, 2, 0, (char *)8)));
	struct stat st;
	char u[32];
	stat("/", &st);
	printf("ustat / %s\n", outcome(syscall(SYS_ustat, (unsigned)st.st_dev, u)));
	printf("ustat bad buffer %s\n", outcome(syscall(SYS_ustat, (unsigned)st.st_dev, (void *)8)));
	printf("ustat no device %s\n", outcome(syscall(SYS_ustat, 0xfffffu, u)));
	printf("types %s\n", names);
}
#else
static void fsinfo(void) {}
#endif

static void readaheads(const char *dir)
{
	char path[512];
	snprintf(path, sizeof path, "%s/readahead.file", dir);
	int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	write(f, path, sizeof path);
	int d = open(dir, O_RDONLY | O_DIRECTORY);
	int p = open(path, O_PATH);
	int w = open(path, O_WRONLY);
	printf("readahead file %s\n", outcome(readahead(f, 0, 4096)));
	printf("readahead directory %s\n", outcome(readahead(d, 0, 4096)));
	printf("readahead O_PATH %s\n", outcome(readahead(p, 0, 4096)));
	printf("readahead write-only %s\n", outcome(readahead(w, 0, 4096)));
	printf("readahead closed %s\n", outcome(readahead(900, 0, 4096)));
	unlink(path);
}

static void clonens(void)
{
	static const struct {
		const char *name;
		unsigned long flags;
	} c[] = {
		{"plain", 0},
		{"newnet", CLONE_NEWNET},
		{"newuser", CLONE_NEWUSER},
		{"newpid", CLONE_NEWPID},
		{"newns", CLONE_NEWNS},
		{"newuts|newipc", CLONE_NEWUTS | CLONE_NEWIPC},
		{"newuser|fs", CLONE_NEWUSER | CLONE_FS},
	};
	for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
		long r = syscall(SYS_clone, c[i].flags | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid(r, NULL, 0);
		printf("clone %s %s\n", c[i].name, outcome(r));
	}
}

/* <linux/random.h>'s, which musl's headers lack. */
#define RNDGETENTCNT _IOR('R', 0x00, int)

static long readlong(const char *p)
{
	long v = -1;
	FILE *f = fopen(p, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void entropy(void)
{
	int cnt = -1;
	int fd = open("/dev/urandom", O_RDONLY);
	printf("RNDGETENTCNT %s\n", outcome(ioctl(fd, RNDGETENTCNT, &cnt)));
	long avail = readlong("/proc/sys/kernel/random/entropy_avail");
	/* LTP ioctl07 allows the count to move by 2 between the reads. */
	printf("entropy_avail agrees %d\n", avail >= 0 && labs(avail - cnt) <= 2);
	printf("poolsize %ld\n", readlong("/proc/sys/kernel/random/poolsize"));
}

/* inchild runs f in a child and prints its line. */
static void inchild(const char *label, long (*f)(void))
{
	int p[2];
	pipe(p);
	pid_t pid = fork();
	if (pid == 0) {
		long r = f();
		char b[64];
		int n = snprintf(b, sizeof b, "%s %s\n", label, outcome(r));
		write(p[1], b, n);
		_exit(0);
	}
	close(p[1]);
	char b[64];
	ssize_t n = read(p[0], b, sizeof b - 1);
	waitpid(pid, NULL, 0);
	printf("%.*s", (int)(n > 0 ? n : 0), b);
	close(p[0]);
}

static long hangup_no_tty(void)
{
	if (setsid() < 0)
		return -1;
	return syscall(SYS_vhangup);
}

static long hangup_nobody(void)
{
	if (setsid() < 0 || syscall(SYS_setresuid, 65534, 65534, 65534) < 0)
		return -1;
	return syscall(SYS_vhangup);
}

static long hangup_tty(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || setsid() < 0)
		return -1;
	int s = open(ptsname(m), O_RDWR); /* the session's first tty: its controlling one */
	if (s < 0)
		return -1;
	ioctl(s, TIOCSCTTY, 0);
	return syscall(SYS_vhangup);
}

/* Linux 6.7 to 6.10; glibc 2.36 names none of them. */
#define NR_FUTEX_WAKE 454
#define NR_STATMOUNT 457
#define NR_LISTMOUNT 458
#define NR_LSM_LIST_MODULES 461
#define NR_MSEAL 462

static void newer(void)
{
	static unsigned int word;
	unsigned long long req[4] = { 0 };
	unsigned int size = 0;
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	/* FUTEX2_SIZE_U32 | FUTEX2_PRIVATE; nobody waits: 0 woken. */
	long r = syscall(NR_FUTEX_WAKE, &word, 0xffffffffUL, 1, 0x02 | 128);
	printf("futex_wake %s woken=%ld\n", outcome(r), r);
	printf("statmount %s\n", outcome(syscall(NR_STATMOUNT, req, NULL, 0, 0)));
	printf("listmount %s\n", outcome(syscall(NR_LISTMOUNT, req, NULL, 0, 0)));
	printf("lsm_list_modules %s\n", outcome(syscall(NR_LSM_LIST_MODULES, NULL, &size, 0)));
	printf("mseal %s\n", page == MAP_FAILED ? "mmap failed" : outcome(syscall(NR_MSEAL, page, 4096, 0)));
}

static void vhangups(void)
{
	inchild("vhangup no tty", hangup_no_tty);
	inchild("vhangup nobody", hangup_nobody);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "same"))
		same();
	else if (argc >= 3 && !strcmp(argv[1], "kbox"))
		kboxonly(atoi(argv[2]));
	else if (argc >= 2 && !strcmp(argv[1], "nofile"))
		nofile();
	else if (argc >= 2 && !strcmp(argv[1], "fsinfo"))
		fsinfo();
	else if (argc >= 3 && !strcmp(argv[1], "readahead"))
		readaheads(argv[2]);
	else if (argc >= 2 && !strcmp(argv[1], "clonens"))
		clonens();
	else if (argc >= 2 && !strcmp(argv[1], "entropy"))
		entropy();
	else if (argc >= 2 && !strcmp(argv[1], "vhangup"))
		vhangups();
	else if (argc >= 2 && !strcmp(argv[1], "newer"))
		newer();
	else if (argc >= 2 && !strcmp(argv[1], "vhangup-tty"))
		inchild("vhangup tty", hangup_tty);
	else
		return 2;
	return 0;
}
