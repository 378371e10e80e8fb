/* compat: small deviations from Linux found by a conformance suite (kbox
 * issue 10). `compat SECTION DIR` makes DIR, works in it and prints one line
 * per check: its name and the result ("ok", a value, or the errno's name).
 * tests/compat_test.go runs each section natively and under kbox and
 * compares the lines; `compat kbox DIR` prints what only kbox must answer
 * (no native run can: the host is not the guest's kernel). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static void report(const char *name, long r)
{
	if (r >= 0)
		printf("%s: ok\n", name);
	else
		printf("%s: %s\n", name, errname(errno));
}

#define TRY(name, call) do { errno = 0; report(name, (long)(call)); } while (0)

/* mode prints the permission bits (and type letter) of path, or its errno. */
static void mode(const char *name, const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		printf("%s: %s\n", name, errname(errno));
		return;
	}
	char t = S_ISDIR(st.st_mode) ? 'd' : S_ISREG(st.st_mode) ? '-' : S_ISFIFO(st.st_mode) ? 'p' :
		 S_ISLNK(st.st_mode) ? 'l' : S_ISCHR(st.st_mode) ? 'c' : '?';
	printf("%s: %c%04o\n", name, t, st.st_mode & 07777);
}

static void fmode(const char *name, int fd)
{
	struct stat st;
	/* newfstatat with AT_EMPTY_PATH, the call glibc makes and kbox
	 * serves for a shadow (musl's fstatat makes the legacy fstat, which
	 * sees the memfd). */
	if (syscall(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH) != 0) {
		printf("%s: %s\n", name, errname(errno));
		return;
	}
	printf("%s: %04o\n", name, st.st_mode & 07777);
}

static int writefile(const char *path, const char *s, mode_t m)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, m);
	if (fd < 0)
		return -1;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		close(fd);
		return -1;
	}
	close(fd);
	return chmod(path, m);
}

/* ---- 1: the umask governs what the guest creates ---- */
static void sec_umask(void)
{
	printf("umask.initial: %04o\n", umask(0));
	close(open("f0", O_CREAT | O_WRONLY, 0666));
	mode("umask0.open", "f0");
	mkdir("d0", 0777);
	mode("umask0.mkdir", "d0");
	mknod("p0", S_IFIFO | 0666, 0);
	mode("umask0.mknod", "p0");
	printf("umask.set027: %04o\n", umask(027));
	close(open("f1", O_CREAT | O_WRONLY, 0666));
	mode("umask027.open", "f1");
	close(creat("f2", 0777));
	mode("umask027.creat", "f2");
	close(openat(AT_FDCWD, "f3", O_CREAT | O_RDWR, 0666));
	mode("umask027.openat", "f3");
	{
		struct { unsigned long long flags, mode, resolve; } how = { O_CREAT | O_WRONLY, 0666, 0 };
		close(syscall(SYS_openat2, AT_FDCWD, "f4", &how, sizeof how));
		mode("umask027.openat2", "f4");
	}
	{
		int fd = open(".", O_TMPFILE | O_RDWR, 0666);
		fmode("umask027.tmpfile", fd);
		close(fd);
	}
	mkdir("d1", 0777);
	mode("umask027.mkdir", "d1");
	mkdirat(AT_FDCWD, "d2", 01777);
	mode("umask027.mkdirat-sticky", "d2");
	mknod("p1", S_IFIFO | 0666, 0);
	mode("umask027.mknod", "p1");
	mkfifo("p2", 0777);
	mode("umask027.mkfifo", "p2");
	symlink("f1", "l1");
	mode("umask027.symlink", "l1");
	chmod("f1", 0666);
	mode("umask027.chmod", "f1");
	/* The existing file keeps its mode. */
	close(open("f0", O_CREAT | O_WRONLY, 0600));
	mode("umask027.open-existing", "f0");
	{
		/* A directory fd of the image (a virtual fd under kbox). */
		int dfd = open("d0", O_RDONLY | O_DIRECTORY);
		close(openat(dfd, "f5", O_CREAT | O_WRONLY, 0666));
		close(dfd);
		mode("umask027.openat-dirfd", "d0/f5");
	}
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		/* Inherited at fork, then changed in the child only. */
		close(open("f6", O_CREAT | O_WRONLY, 0666));
		mode("umask.child-inherits", "f6");
		umask(0077);
		close(open("f7", O_CREAT | O_WRONLY, 0666));
		mode("umask.child-own", "f7");
		fflush(stdout);
		_exit(0);
	}
	waitpid(c, NULL, 0);
	close(open("f8", O_CREAT | O_WRONLY, 0666));
	mode("umask.parent-unchanged", "f8");
	fflush(stdout);
	c = fork();
	if (c == 0) {
		/* Kept across exec. */
		umask(0);
		execl("/bin/sh", "sh", "-c", "echo umask.after-exec: $(umask); : > f9", (char *)NULL);
		_exit(127);
	}
	waitpid(c, NULL, 0);
	mode("umask.after-exec-create", "f9");
}

/* ---- 2: a regular file as the dirfd ---- */
static void dirfd_checks(const char *tag, int fd)
{
	char name[64], buf[64];
	struct stat st;
	char sx[256]; /* struct statx: musl's headers may lack it */
#define DT(what, call) do { snprintf(name, sizeof name, "%s.%s", tag, what); TRY(name, call); } while (0)
	DT("openat", openat(fd, "x", O_RDONLY));
	DT("openat-creat", openat(fd, "x", O_RDWR | O_CREAT, 0644));
	DT("faccessat", faccessat(fd, "x", F_OK, 0));
	DT("readlinkat", readlinkat(fd, "x", buf, sizeof buf));
	DT("statx", syscall(SYS_statx, fd, "x", 0, 0x7ff, sx));
	DT("mkdirat", mkdirat(fd, "x", 0755));
	DT("mknodat", mknodat(fd, "x", S_IFIFO | 0644, 0));
	DT("fstatat", fstatat(fd, "x", &st, 0));
	DT("unlinkat", unlinkat(fd, "x", 0));
	DT("symlinkat", symlinkat("t", fd, "x"));
	DT("fchmodat", fchmodat(fd, "x", 0644, 0));
	DT("fchownat", fchownat(fd, "x", 0, 0, 0));
	DT("renameat", renameat(fd, "x", AT_FDCWD, "y"));
	DT("linkat", linkat(AT_FDCWD, "file", fd, "x", 0));
	DT("utimensat", utimensat(fd, "x", NULL, 0));
	DT("fchdir", fchdir(fd));
	DT("openat-abs-ignores-dirfd", close(openat(fd, "/", O_RDONLY)));
	DT("fstatat-empty", fstatat(fd, "", &st, AT_EMPTY_PATH));
#undef DT
}

static void sec_dirfd(void)
{
	writefile("file", "data\n", 0644);
	int fd = open("file", O_RDONLY);
	dirfd_checks("dirfd.ro", fd);
	close(fd);
	fd = open("file", O_RDWR);
	dirfd_checks("dirfd.rw", fd);
	close(fd);
	int p[2];
	pipe(p);
	dirfd_checks("dirfd.pipe", p[0]);
	close(p[0]);
	close(p[1]);
	dirfd_checks("dirfd.closed", 900);
	struct stat st;
	TRY("dirfd.dot-after-file", stat("file/.", &st));
}

/* ---- 3: O_DIRECT ---- */
static void direct_fl(const char *name, int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		printf("%s: %s\n", name, errname(errno));
	else
		printf("%s: %s\n", name, fl & O_DIRECT ? "direct" : "buffered");
}

static void sec_direct(void)
{
	static char buf[8192] __attribute__((aligned(4096)));
	memset(buf, 'x', sizeof buf);
	writefile("file", "", 0644);
	int fd = open("file", O_WRONLY | O_DIRECT);
	report("direct.open-wronly", fd);
	direct_fl("direct.open-wronly.getfl", fd);
	TRY("direct.write-aligned", write(fd, buf, 4096));
	close(fd);
	fd = open("file", O_RDONLY | O_DIRECT);
	report("direct.open-rdonly", fd);
	direct_fl("direct.open-rdonly.getfl", fd);
	printf("direct.read-aligned: %ld\n", (long)read(fd, buf, 4096));
	TRY("direct.setfl-clear", fcntl(fd, F_SETFL, 0));
	direct_fl("direct.setfl-clear.getfl", fd);
	close(fd);
	fd = open("file", O_RDWR);
	direct_fl("direct.plain.getfl", fd);
	TRY("direct.setfl-set", fcntl(fd, F_SETFL, O_DIRECT));
	direct_fl("direct.setfl-set.getfl", fd);
	int d = dup(fd);
	direct_fl("direct.dup-shares.getfl", d);
	close(d);
	TRY("direct.pwrite-aligned", pwrite(fd, buf, 4096, 4096));
	close(fd);
	fd = open("new", O_RDWR | O_CREAT | O_DIRECT, 0644);
	report("direct.open-creat", fd);
	direct_fl("direct.open-creat.getfl", fd);
	close(fd);
	fd = open("file", O_RDONLY | O_DIRECT);
	printf("direct.size-after: %ld\n", (long)lseek(fd, 0, SEEK_END));
	close(fd);
}

/* ---- 4: signals within the guest's tree ---- */
static volatile sig_atomic_t got;
static void on_usr1(int s) { (void)s; got++; }

static void sec_kill(void)
{
	signal(SIGUSR1, on_usr1);
	fflush(stdout);
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	TRY("kill.gone", kill(gone, 0));
	TRY("kill.gone-term", kill(gone, SIGTERM));
	TRY("kill.gone-group", kill(-gone, 0));
	TRY("tkill.gone", syscall(SYS_tkill, gone, 0));
	TRY("tgkill.gone-tid", syscall(SYS_tgkill, getpid(), gone, 0));
	TRY("tgkill.gone-tgid", syscall(SYS_tgkill, gone, gone, 0));
	TRY("pidfd_open.gone", syscall(SYS_pidfd_open, gone, 0));
	{
		siginfo_t si;
		memset(&si, 0, sizeof si);
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		TRY("sigqueueinfo.gone", syscall(SYS_rt_sigqueueinfo, gone, SIGUSR1, &si));
		TRY("sigqueueinfo.self", syscall(SYS_rt_sigqueueinfo, getpid(), SIGUSR1, &si));
		printf("sigqueueinfo.self.got: %d\n", (int)got);
		got = 0;
	}

	pid_t z = fork();
	if (z == 0)
		_exit(3);
	siginfo_t si;
	waitid(P_PID, z, &si, WEXITED | WNOWAIT); /* now a zombie */
	TRY("kill.zombie", kill(z, 0));
	TRY("kill.zombie-term", kill(z, SIGTERM));
	TRY("pidfd_open.zombie", close(syscall(SYS_pidfd_open, z, 0)));
	int st;
	waitpid(z, &st, 0);
	printf("kill.zombie-status: %d\n", WEXITSTATUS(st));

	TRY("kill.self-group-probe", kill(0, 0));
	TRY("kill.own-pgrp-probe", kill(-getpgrp(), 0));
	TRY("kill.self-group-usr1", kill(0, SIGUSR1));
	printf("kill.self-group-usr1.got: %d\n", (int)got);
	got = 0;
	TRY("kill.own-pgrp-usr1", kill(-getpgrp(), SIGUSR1));
	printf("kill.own-pgrp-usr1.got: %d\n", (int)got);
	got = 0;
	TRY("kill.self", kill(getpid(), SIGUSR1));
	printf("kill.self.got: %d\n", (int)got);

	/* A group whose leader has exited: its other member still counts. */
	int p[2];
	pipe(p);
	fflush(stdout);
	pid_t leader = fork();
	if (leader == 0) {
		setpgid(0, 0);
		pid_t member = fork();
		if (member == 0) {
			close(p[0]);
			close(p[1]);
			pause();
			_exit(0);
		}
		write(p[1], &member, sizeof member);
		_exit(0);
	}
	pid_t member;
	close(p[1]);
	read(p[0], &member, sizeof member);
	close(p[0]);
	waitpid(leader, NULL, 0);
	TRY("kill.group-leader-gone", kill(-leader, 0));
	TRY("kill.group-leader-gone-kill", kill(-leader, SIGKILL));
}

/* ---- 5: the UTS names ---- */
static void show_uts(const char *tag)
{
	struct utsname u;
	char h[128] = "", d[128] = "", hn[128] = "";
	uname(&u);
	FILE *f = fopen("/proc/sys/kernel/hostname", "r");
	if (f) {
		if (!fgets(h, sizeof h, f))
			h[0] = 0;
		fclose(f);
	}
	h[strcspn(h, "\n")] = 0;
	f = fopen("/proc/sys/kernel/domainname", "r");
	if (f) {
		if (!fgets(d, sizeof d, f))
			d[0] = 0;
		fclose(f);
	}
	d[strcspn(d, "\n")] = 0;
	gethostname(hn, sizeof hn);
	printf("%s.proc-hostname-agrees: %s\n", tag, strcmp(h, u.nodename) == 0 ? "yes" : h);
	printf("%s.gethostname-agrees: %s\n", tag, strcmp(hn, u.nodename) == 0 ? "yes" : hn);
	printf("%s.proc-domainname-agrees: %s\n", tag, strcmp(d, u.domainname) == 0 ? "yes" : d);
}

static void sec_uts(void)
{
	show_uts("uts.start");
	TRY("uts.sethostname", sethostname("kbox-compat", 11));
	struct utsname u;
	uname(&u);
	printf("uts.nodename: %s\n", u.nodename);
	show_uts("uts.after-set");
	TRY("uts.setdomainname", setdomainname("compat.example", 14));
	uname(&u);
	printf("uts.domainname: %s\n", u.domainname);
	show_uts("uts.after-setdomain");
	{
		int fd = open("/proc/sys/kernel/hostname", O_WRONLY);
		report("uts.proc-write-open", fd);
		TRY("uts.proc-write", write(fd, "written-name\n", 13));
		close(fd);
		uname(&u);
		printf("uts.nodename-after-write: %s\n", u.nodename);
		show_uts("uts.after-write");
	}
	char big[70];
	memset(big, 'a', sizeof big);
	TRY("uts.sethostname-65", sethostname(big, 65));
	TRY("uts.sethostname-64", sethostname(big, 64));
	uname(&u);
	printf("uts.nodename-64: %zu\n", strlen(u.nodename));
	TRY("uts.sethostname-negative", syscall(SYS_sethostname, big, -1));
	TRY("uts.sethostname-efault", syscall(SYS_sethostname, (char *)8, 5));
	TRY("uts.setdomainname-65", setdomainname(big, 65));
	TRY("uts.sethostname-empty", sethostname("", 0));
	uname(&u);
	printf("uts.nodename-empty: [%s]\n", u.nodename);
}

/* ---- 7: personality ---- */
static void sec_personality(void)
{
	printf("personality.query: %#x\n", personality(0xffffffff));
	printf("personality.set-linux: %#x\n", personality(PER_LINUX));
	printf("personality.set-norandom: %#x\n", personality(PER_LINUX | ADDR_NO_RANDOMIZE));
	printf("personality.query-after: %#x\n", personality(0xffffffff));
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		printf("personality.child: %#x\n", personality(0xffffffff));
		fflush(stdout);
		_exit(0);
	}
	waitpid(c, NULL, 0);
	printf("personality.restore: %#x\n", personality(PER_LINUX));
	printf("personality.query-restored: %#x\n", personality(0xffffffff));
}

/* ---- 8: trailing slashes ---- */
static void sec_slash(void)
{
	struct stat st;
	writefile("file", "data\n", 0644);
	mkdir("dir", 0755);
	symlink("file", "lfile");
	symlink("dir", "ldir");
	TRY("slash.creat-missing", open("missing/", O_CREAT | O_WRONLY, 0644));
	TRY("slash.creat-missing.after", stat("missing", &st));
	TRY("slash.creat-dir-missing", open("dir/missing/", O_CREAT | O_WRONLY, 0644));
	TRY("slash.creat-dir-missing.after", stat("dir/missing", &st));
	TRY("slash.creat-file", open("file/", O_CREAT | O_WRONLY, 0644));
	TRY("slash.open-file", open("file/", O_RDONLY));
	TRY("slash.open-file-twice", open("file/", O_RDONLY));
	TRY("slash.open-dir", close(open("dir/", O_RDONLY)));
	TRY("slash.open-dir-creat", open("dir/", O_CREAT | O_RDONLY, 0644));
	TRY("slash.open-lfile", open("lfile/", O_RDONLY));
	TRY("slash.open-ldir", close(open("ldir/", O_RDONLY)));
	TRY("slash.stat-file", stat("file/", &st));
	TRY("slash.lstat-file", lstat("file/", &st));
	TRY("slash.lstat-lfile", lstat("lfile/", &st));
	errno = 0;
	printf("slash.lstat-ldir-follows: %s\n", lstat("ldir/", &st) == 0 ? (S_ISDIR(st.st_mode) ? "dir" : "not-dir") : errname(errno));
	TRY("slash.access-file", access("file/", F_OK));
	TRY("slash.mkdir-a", mkdir("a/", 0755));
	TRY("slash.mkdir-a-b", mkdir("a/b/", 0755));
	errno = 0;
	printf("slash.mkdir-a-b.is: %s\n", stat("a/b", &st) == 0 && S_ISDIR(st.st_mode) ? "dir" : errname(errno));
	TRY("slash.mkdir-dot", mkdir("a/c/.", 0755));
	TRY("slash.mknod", mknod("n/", S_IFIFO | 0644, 0));
	TRY("slash.symlink", symlink("x", "s/"));
	TRY("slash.link", link("file", "h/"));
	TRY("slash.unlink-file", unlink("file/"));
	TRY("slash.rmdir-file", rmdir("file/"));
	TRY("slash.rename-file-to-slash", rename("file", "file2/"));
	TRY("slash.rename-file-from-slash", rename("file/", "file2"));
	TRY("slash.rename-dir", rename("a/b/", "a/c/"));
	TRY("slash.rmdir-dir", rmdir("a/c/"));
	TRY("slash.truncate-file", truncate("file/", 0));
	TRY("slash.chmod-file", chmod("file/", 0600));
	TRY("slash.chdir-file", chdir("file/"));
	TRY("slash.chdir-dir", chdir("dir/"));
	char cwd[4096];
	if (getcwd(cwd, sizeof cwd)) {
		char *b = strrchr(cwd, '/');
		printf("slash.getcwd-after: %s\n", b ? b : cwd);
	}
	chdir("..");
	TRY("slash.readlink-lfile", readlink("lfile/", cwd, sizeof cwd));
	TRY("slash.stat-dot-file", stat("file/.", &st));
}

/* ---- 9 and 10: exec by fd and directory fd; a script's $0 ---- */
static const char script[] =
	"#!/bin/sh\n"
	"d=$(pwd)\n"
	"case \"$0\" in \"$d\"/*) echo \"$1: \\$0=<dir>/${0#\"$d\"/}\";; *) echo \"$1: \\$0=$0\";; esac\n";

static void run(const char *name, int (*fn)(void *), void *arg)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		errno = 0;
		fn(arg);
		printf("%s: %s\n", name, errname(errno));
		fflush(stdout);
		_exit(99);
	}
	int st;
	waitpid(c, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) != 99)
		printf("%s.exit: %d\n", name, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		printf("%s.signal: %d\n", name, WTERMSIG(st));
	fflush(stdout);
}

struct xa {
	int fd;
	const char *path;
	int flags;
	const char *tag;
};

static char *self;

static int do_execveat(void *p)
{
	struct xa *a = p;
	char *argv[] = { (char *)"compat", (char *)"child", (char *)a->tag, NULL };
	return syscall(SYS_execveat, a->fd, a->path, argv, environ, a->flags);
}

static int do_fexecve(void *p)
{
	struct xa *a = p;
	char *argv[] = { (char *)"compat", (char *)"child", (char *)a->tag, NULL };
	return fexecve(a->fd, argv, environ);
}

static int do_execv(void *p)
{
	struct xa *a = p;
	char *argv[] = { (char *)a->path, (char *)a->tag, NULL };
	return execv(a->path, argv);
}

static int copyself(const char *dst)
{
	int in = open(self, O_RDONLY);
	if (in < 0)
		return -1;
	int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	char b[65536];
	ssize_t n;
	if (out < 0)
		return -1;
	while ((n = read(in, b, sizeof b)) > 0)
		if (write(out, b, n) != n)
			return -1;
	close(in);
	close(out);
	return 0;
}

static void sec_exec(void)
{
	struct xa a;
	copyself("prog");
	writefile("s.sh", script, 0755);
	writefile("plain", "data\n", 0644);
	mkdir("sub", 0755);
	writefile("sub/t.sh", script, 0755);

	a = (struct xa){ open(self, O_RDONLY | O_CLOEXEC), "", AT_EMPTY_PATH, "exec.fd-ro-cloexec" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open("prog", O_RDONLY), "", AT_EMPTY_PATH, "exec.fd-ro" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open("prog", O_PATH | O_CLOEXEC), "", AT_EMPTY_PATH, "exec.fd-path" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open("prog", O_RDONLY | O_CLOEXEC), "", 0, "exec.fexecve" };
	run(a.tag, do_fexecve, &a);
	close(a.fd);
	a = (struct xa){ open("plain", O_RDONLY | O_CLOEXEC), "", AT_EMPTY_PATH, "exec.fd-not-executable" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open(".", O_RDONLY | O_DIRECTORY), "", AT_EMPTY_PATH, "exec.fd-directory" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), "prog", 0, "exec.dirfd-name" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open(".", O_PATH | O_DIRECTORY | O_CLOEXEC), "prog", 0, "exec.dirfd-path-name" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), "missing", 0, "exec.dirfd-missing" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open("plain", O_RDONLY | O_CLOEXEC), "prog", 0, "exec.dirfd-file" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	/* Scripts: by fd the interpreter gets /dev/fd/N, or ENOENT when the
	 * fd is close-on-exec; relative to a directory fd, /dev/fd/N/name. */
	a = (struct xa){ open("s.sh", O_RDONLY), "", AT_EMPTY_PATH, "exec.script-fd" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open("s.sh", O_RDONLY | O_CLOEXEC), "", AT_EMPTY_PATH, "exec.script-fd-cloexec" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	a = (struct xa){ open(".", O_RDONLY | O_DIRECTORY), "s.sh", 0, "exec.script-dirfd" };
	run(a.tag, do_execveat, &a);
	close(a.fd);
	/* 10: $0 is the path as given. */
	char cwd[4096], p[8192];
	getcwd(cwd, sizeof cwd);
	snprintf(p, sizeof p, "%s/s.sh", cwd);
	a = (struct xa){ -1, p, 0, "script.absolute" };
	run(a.tag, do_execv, &a);
	snprintf(p, sizeof p, "%s/sub/t.sh", cwd);
	a = (struct xa){ -1, p, 0, "script.absolute-sub" };
	run(a.tag, do_execv, &a);
	snprintf(p, sizeof p, "%s//sub/./t.sh", cwd);
	a = (struct xa){ -1, p, 0, "script.absolute-unclean" };
	run(a.tag, do_execv, &a);
	a = (struct xa){ -1, "./s.sh", 0, "script.dot" };
	run(a.tag, do_execv, &a);
	a = (struct xa){ -1, "sub/../s.sh", 0, "script.dotdot" };
	run(a.tag, do_execv, &a);
	{
		const char *b = strrchr(cwd, '/');
		snprintf(p, sizeof p, "..%s/sub/t.sh", b);
		a = (struct xa){ -1, p, 0, "script.parent" };
		run(a.tag, do_execv, &a);
	}
}

/* ---- what only kbox must answer ---- */
static void sec_kbox(void)
{
	struct utsname u;
	uname(&u);
	printf("kbox.nodename: %s\n", u.nodename);
	TRY("kbox.kill-outside", kill(1, 0));
	printf("kbox.ppid: %d\n", (int)getppid());
	TRY("kbox.kill-all", kill(-1, 0));
	printf("kbox.own-group: %s\n", getpgrp() == getpid() ? "yes" : "no");
	int fd = open(".", O_RDONLY | O_DIRECTORY);
	TRY("kbox.f_notify", fcntl(fd, F_NOTIFY, DN_CREATE));
	close(fd);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "child") == 0) {
		printf("%s: ran\n", argv[2]);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: compat SECTION DIR\n");
		return 2;
	}
	self = argv[0];
	for (char *p = argv[2] + 1;; p++) { /* mkdir -p */
		char c = *p;
		if (c != '/' && c != 0)
			continue;
		*p = 0;
		if (mkdir(argv[2], 0755) != 0 && errno != EEXIST) {
			perror(argv[2]);
			return 1;
		}
		*p = c;
		if (c == 0)
			break;
	}
	if (chdir(argv[2]) != 0) {
		perror(argv[2]);
		return 1;
	}
	const char *s = argv[1];
	if (strcmp(s, "umask") == 0)
		sec_umask();
	else if (strcmp(s, "dirfd") == 0)
		sec_dirfd();
	else if (strcmp(s, "direct") == 0)
		sec_direct();
	else if (strcmp(s, "kill") == 0)
		sec_kill();
	else if (strcmp(s, "uts") == 0)
		sec_uts();
	else if (strcmp(s, "personality") == 0)
		sec_personality();
	else if (strcmp(s, "slash") == 0)
		sec_slash();
	else if (strcmp(s, "exec") == 0)
		sec_exec();
	else if (strcmp(s, "kbox") == 0)
		sec_kbox();
	else {
		fprintf(stderr, "compat: unknown section %s\n", s);
		return 2;
	}
	return 0;
}
