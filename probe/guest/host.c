/*
 * host.c: kbox-probe's probes of what lies beyond the guest's own kernel:
 * the host's network, privilege, the limits, the host kernel's riskier
 * interfaces and the in-process tiers' way out (gadget.c).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "probe.h"
#include "gadget.c" /* gadget_read: the in-process tiers' way out */

static struct res dial(const char *ip, int port, int want_token)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return DENIED(errno, "socket");
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	int r = connect(s, (struct sockaddr *)&a, sizeof a);
	if (r < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(s);
		return DENIED(e, "connect %s:%d", ip, port);
	}
	struct pollfd pf = {.fd = s, .events = POLLOUT};
	if (r < 0) {
		if (poll(&pf, 1, 3000) <= 0) {
			close(s);
			return DENIED(ETIMEDOUT, "connect %s:%d: no answer in 3 s", ip, port);
		}
		int e = 0;
		socklen_t l = sizeof e;
		getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
		if (e) {
			close(s);
			return DENIED(e, "connect %s:%d", ip, port);
		}
	}
	if (!want_token) {
		close(s);
		return ALLOWED("connected to %s:%d", ip, port);
	}
	char buf[256];
	size_t n = 0;
	pf.events = POLLIN;
	while (n < sizeof buf - 1 && poll(&pf, 1, 3000) > 0) {
		ssize_t k = read(s, buf + n, sizeof buf - 1 - n);
		if (k <= 0)
			break;
		n += k;
	}
	buf[n] = 0;
	close(s);
	if (p_token && strstr(buf, p_token))
		return ALLOWED("connected to %s:%d and read kbox probe's token", ip, port);
	return DENIED(ECONNRESET, "connected to %s:%d, no token read (not the host's listener)", ip, port);
}
struct res net_loopback(void) { return dial("127.0.0.1", p_port, 1); }
struct res net_host(void) { return dial("10.0.2.2", p_port, 1); }
struct res net_metadata(void) { return dial("169.254.169.254", 80, 0); }
struct res net_outside(void) { return dial("192.0.2.1", 80, 0); }

/* ---- privilege ---- */

struct res setuid_host(void)
{
	const char *p = "/tmp/.kbox-probe-suid";
	char buf[65536];
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return SKIPPED("open /proc/self/exe: %s", strerror(errno));
	unlink(p);
	int out = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0755);
	if (out < 0) {
		int e = errno;
		close(in);
		return SKIPPED("create %s: %s", p, strerror(e));
	}
	ssize_t k;
	while ((k = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, k) != k)
			break;
	close(in);
	close(out);
	if (chown(p, 0, 0) < 0 || chmod(p, 04755) < 0) {
		int e = errno;
		unlink(p);
		return DENIED(e, "make %s setuid root", p);
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		unlink(p);
		return SKIPPED("fork: %s", strerror(e));
	}
	if (pid == 0) {
		/* Drop to nobody, then run the setuid copy: it tries what only
		 * the host's root may (a negative nice value). */
		setgroups(0, NULL);
		setresgid(65534, 65534, 65534);
		setresuid(65534, 65534, 65534);
		execl(p, p, "--suid-child", (char *)NULL);
		_exit(126);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	unlink(p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return ALLOWED("the setuid copy set a negative nice value on the host");
	if (WIFEXITED(st) && WEXITSTATUS(st) < 126)
		return DENIED(WEXITSTATUS(st), "the setuid copy ran; setpriority(-5) failed");
	return DENIED(0, "the setuid copy did not run (status 0x%x)", st);
}

int suid_child(void)
{
	if (setpriority(PRIO_PROCESS, 0, -5) < 0)
		return errno & 0x7f;
	return 0;
}

/* ---- limits ---- */

struct res limit_fsize(void)
{
	const char *p = "/tmp/.kbox-probe-fsize";
	signal(SIGXFSZ, SIG_IGN);
	unlink(p);
	int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return SKIPPED("create %s: %s", p, strerror(errno));
	static char b[65536];
	long want = p_fsize + 4096, done = 0;
	int e = 0;
	while (done < want) {
		long n = want - done < (long)sizeof b ? want - done : (long)sizeof b;
		ssize_t k = write(fd, b, n);
		if (k <= 0) {
			e = k < 0 ? errno : ENOSPC;
			break;
		}
		done += k;
	}
	close(fd);
	unlink(p);
	signal(SIGXFSZ, SIG_DFL);
	if (done >= want)
		return ALLOWED("wrote %ld bytes, over the limit %ld", done, p_fsize);
	return DENIED(e, "stopped at %ld bytes (limit %ld)", done, p_fsize);
}

/* Files of 512 KiB (under any file_size limit worth having) in an image
 * directory until limit + 1 MiB is written; all removed after. */
struct res limit_image_writes(void)
{
	const char *dir = param("iwdir");
	long limit = lparam("iw");
	static char b[64 << 10];
	long want = limit + (1 << 20), done = 0;
	int e = 0, nfiles = 0;
	char p[4200];
	signal(SIGXFSZ, SIG_IGN);
	while (done < want && !e) {
		snprintf(p, sizeof p, "%s/.kbox-probe-iw-%d-%d", strcmp(dir, "/") ? dir : "", getpid(), nfiles);
		int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0) {
			e = errno;
			break;
		}
		nfiles++;
		for (long in = 0; in < (512 << 10) && done < want; in += sizeof b) {
			ssize_t k = write(fd, b, sizeof b);
			if (k != (ssize_t)sizeof b) {
				e = k < 0 ? errno : ENOSPC;
				if (k > 0)
					done += k;
				break;
			}
			done += k;
		}
		if (!e && fsync(fd) < 0)
			e = errno;
		close(fd);
	}
	for (int i = 0; i < nfiles; i++) {
		snprintf(p, sizeof p, "%s/.kbox-probe-iw-%d-%d", strcmp(dir, "/") ? dir : "", getpid(), i);
		unlink(p);
	}
	signal(SIGXFSZ, SIG_DFL);
	if (done >= want)
		return ALLOWED("wrote %ld bytes in %d files in %s, over the limit %ld", done, nfiles, dir, limit);
	return DENIED(e, "stopped at %ld bytes in %d files in %s (limit %ld)", done, nfiles, dir, limit);
}

struct res limit_procs(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return SKIPPED("pipe: %s", strerror(errno));
	long want = p_procs + 1, made = 0;
	int e = 0;
	pid_t kids[4096];
	if (want > 4096)
		return SKIPPED("limit %ld too large to probe", p_procs);
	for (; made < want; made++) {
		pid_t pid = fork();
		if (pid < 0) {
			e = errno;
			break;
		}
		if (pid == 0) {
			char c;
			close(fds[1]);
			read(fds[0], &c, 1); /* until the parent closes the pipe */
			_exit(0);
		}
		kids[made] = pid;
	}
	close(fds[0]);
	close(fds[1]);
	for (long i = 0; i < made; i++)
		waitpid(kids[i], NULL, 0);
	if (made >= want)
		return ALLOWED("made %ld processes (limit %ld, with this one)", made, p_procs);
	return DENIED(e, "fork failed after %ld more processes (limit %ld)", made, p_procs);
}

struct res limit_quota(void)
{
	long n = p_quota_n + 1;
	if (n > 1000000)
		return SKIPPED("quota %ld too large to probe", p_quota_n);
	int first = -1;
	for (long i = 0; i < n; i++) {
		long r = syscall(p_quota_nr, 0, 0, 0, 0, 0, 0);
		int e = r < 0 ? errno : 0;
		if (i == 0)
			first = e;
		if (e == p_quota_errno && e != first)
			return DENIED(e, "syscall %ld refused after %ld calls of this probe", p_quota_nr, i);
		if (e == p_quota_errno && i > 0 && first == e)
			return DENIED(e, "syscall %ld refused at once (the quota was used up before)", p_quota_nr);
	}
	return ALLOWED("%ld calls of syscall %ld, none refused by the quota", n, p_quota_nr);
}

/* ---- kernel surface: refused syscalls ---- */

/* A syscall counts as denied when it fails with one of the errnos of a
 * refusal (EPERM, EACCES, ENOSYS); any other result means the kernel
 * behind it took the call. */
static struct res surface(const char *what, long r, int e)
{
	if (r >= 0) {
		if (r > 2)
			close((int)r);
		return ALLOWED("%s returned %ld", what, r);
	}
	if (e == EPERM || e == EACCES || e == ENOSYS)
		return DENIED(e, "%s", what);
	return ALLOWED("%s reached a kernel (failed with %s)", what, errname(e));
}

/* clone(2) with namespace flags, as a fork: unshare's way in by another
 * door. */
struct res sys_clonens(void)
{
	long r = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	int e = errno;
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	return surface("clone(CLONE_NEWUSER|CLONE_NEWNET)", r > 0 ? 0 : r, e);
}

struct res sys_unshare(void)
{
	pid_t pid = fork();
	if (pid < 0) {
		/* A tier that runs one process (trap, rewrite): try it here.
		 * Success would be more permissive than expected anyway. */
		long r = unshare(CLONE_NEWUSER);
		return surface("unshare(CLONE_NEWUSER), in the probe's own process (fork failed)", r, r < 0 ? errno : 0);
	}
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER) < 0 ? (errno & 0x7f) : 0);
	int st = 0;
	waitpid(pid, &st, 0);
	int e = WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
	return surface("unshare(CLONE_NEWUSER)", e ? -1 : 0, e);
}

struct res sys_bpf(void)
{
	/* BPF_MAP_CREATE of a 1-entry array map. */
	unsigned int attr[30] = {2 /* BPF_MAP_TYPE_ARRAY */, 4, 4, 1};
	long r = syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof attr);
	return surface("bpf(BPF_MAP_CREATE)", r, errno);
}

struct res sys_perf(void)
{
	/* A software cpu-clock counter of this process. */
	unsigned char attr[128] = {0};
	unsigned int *u = (unsigned int *)attr;
	u[0] = 1;   /* PERF_TYPE_SOFTWARE */
	u[1] = 128; /* size */
	long r = syscall(SYS_perf_event_open, attr, 0, -1, -1, 0);
	return surface("perf_event_open(cpu-clock)", r, errno);
}

struct res sys_keyctl(void)
{
	long r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
	return surface("keyctl(KEYCTL_GET_KEYRING_ID, session)", r, errno);
}

struct res sys_io_uring(void)
{
	unsigned char params[120] = {0};
	long r = syscall(SYS_io_uring_setup, 1, params);
	return surface("io_uring_setup(1)", r, errno);
}

struct res sys_mount(void)
{
	const char *d = "/tmp/.kbox-probe-mnt";
	mkdir(d, 0700);
	if (mount("none", d, "tmpfs", 0, NULL) < 0) {
		int e = errno;
		rmdir(d);
		return DENIED(e, "mount tmpfs on %s", d);
	}
	umount(d);
	rmdir(d);
	return ALLOWED("mounted a tmpfs on %s (in the guest's kernel)", d);
}

/* inproc.gadget: the host marker read through a `syscall; ret` found in
 * an executable mapping that is not the program's own (gadget.c). */
struct res inproc_gadget(void)
{
	char buf[256], why[200];
	if (gadget_read(p_marker, buf, sizeof buf, why, sizeof why) >= 0 && p_token && strstr(buf, p_token))
		return ALLOWED("%s", why);
	return DENIED(0, "%s", why);
}

