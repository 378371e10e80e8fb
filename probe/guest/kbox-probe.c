/*
 * kbox-probe: the guest side of `kbox probe` (docs/agents.md, probe/).
 *
 * kbox runs it inside the guest as
 *     kbox-probe KEY=VALUE... -- PROBE-ID...
 * and it tries each named probe's one operation, printing one JSON line a
 * probe on stdout:
 *     {"id":"...","observed":"allowed|denied|skipped","errno":"ENOENT","detail":"..."}
 * kbox computes what each probe should observe from the options and the
 * policy, and compares. Here nothing is judged: "allowed" means the
 * operation did what it asked for (a file opened, the host marker's token
 * read back, a host process signalled), "denied" that it did not.
 *
 * Built static with musl-gcc by the Makefile and embedded in kbox
 * (probe/embed.go); kbox binds it read-only at /.kbox-probe.
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

/* The parameters kbox passes (KEY=VALUE). */
const char *p_token, *p_marker, *p_hidden, *p_ro, *p_bind, *p_rwbind;
long p_kbox, p_parent, p_port, p_fsize, p_procs, p_quota_nr, p_quota_n, p_quota_errno;

const char *param(const char *key)
{
	extern char **probe_argv;
	for (char **a = probe_argv; *a && strcmp(*a, "--") != 0; a++) {
		size_t n = strlen(key);
		if (strncmp(*a, key, n) == 0 && (*a)[n] == '=')
			return *a + n + 1;
	}
	return NULL;
}
char **probe_argv;

long lparam(const char *key)
{
	const char *v = param(key);
	return v ? strtol(v, NULL, 10) : 0;
}

struct res mk(const char *obs, int err, const char *fmt, ...)
{
	struct res r = {obs, err, ""};
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r.detail, sizeof r.detail, fmt, ap);
		va_end(ap);
	}
	return r;
}

static void jstr(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = *s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

const char *errname(int e)
{
	switch (e) {
#define E(x) case x: return #x;
	E(EPERM) E(ENOENT) E(ESRCH) E(EINTR) E(EIO) E(ENXIO) E(E2BIG) E(ENOEXEC) E(EBADF) E(ECHILD)
	E(EAGAIN) E(ENOMEM) E(EACCES) E(EFAULT) E(EBUSY) E(EEXIST) E(EXDEV) E(ENODEV) E(ENOTDIR)
	E(EISDIR) E(EINVAL) E(ENFILE) E(EMFILE) E(ETXTBSY) E(EFBIG) E(ENOSPC) E(ESPIPE) E(EROFS)
	E(EMLINK) E(EPIPE) E(ERANGE) E(ENAMETOOLONG) E(ENOSYS) E(ELOOP) E(EOPNOTSUPP) E(EAFNOSUPPORT)
	E(EADDRINUSE) E(EADDRNOTAVAIL) E(ENETDOWN) E(ENETUNREACH) E(ECONNRESET) E(ETIMEDOUT)
	E(ECONNREFUSED) E(EHOSTUNREACH) E(EINPROGRESS) E(EPROTONOSUPPORT) E(ESOCKTNOSUPPORT)
	E(EDQUOT)
#undef E
	}
	return "";
}

static void emit(const char *id, struct res r)
{
	printf("{\"id\":");
	jstr(id);
	printf(",\"observed\":\"%s\",\"errno\":", r.observed);
	jstr(r.err ? errname(r.err) : "");
	printf(",\"detail\":");
	jstr(r.detail);
	printf("}\n");
	fflush(stdout);
}

/* readall reads up to n-1 bytes of path (NUL-terminated) or returns -1. */
int readfile(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, n - 1);
	int e = errno;
	close(fd);
	if (k < 0) {
		errno = e;
		return -1;
	}
	buf[k] = 0;
	return 0;
}

/* The host marker: a host file outside every bind whose content is the
 * token. Reading the token back through path means a host file was
 * reached. */
struct res read_marker(const char *path)
{
	char buf[256];
	if (readfile(path, buf, sizeof buf) < 0)
		return DENIED(errno, "%s", path);
	if (p_token && strstr(buf, p_token))
		return ALLOWED("read the host marker through %s", path);
	return DENIED(0, "%s opened but is not the host marker", path);
}

struct res open_read(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return DENIED(errno, "%s", path);
	char b[64];
	ssize_t k = read(fd, b, sizeof b);
	int e = errno;
	close(fd);
	if (k < 0 && e != EISDIR)
		return DENIED(e, "%s opened, read failed", path);
	return ALLOWED("%s", path);
}

static void split(const char *path, char *dir, char *base)
{
	const char *s = strrchr(path, '/');
	if (!s || s == path) {
		strcpy(dir, "/");
		strcpy(base, s ? s + 1 : path);
		return;
	}
	memcpy(dir, path, s - path);
	dir[s - path] = 0;
	strcpy(base, s + 1);
}

/* ---- hidden paths ---- */

static struct res hidden_open(void) { return open_read(p_hidden); }

static struct res hidden_stat(void)
{
	struct stat st;
	if (lstat(p_hidden, &st) < 0)
		return DENIED(errno, "lstat %s", p_hidden);
	return ALLOWED("lstat %s", p_hidden);
}

static struct res hidden_dotdot(void)
{
	char dir[4096], base[4096], p[8300];
	split(p_hidden, dir, base);
	if (strcmp(dir, "/") == 0)
		snprintf(p, sizeof p, "/../%s", base);
	else {
		char d2[4096], b2[4096];
		split(dir, d2, b2);
		snprintf(p, sizeof p, "%.2000s/../%.2000s/%.2000s", dir, b2, base);
	}
	return open_read(p);
}

static struct res hidden_symlink(void)
{
	const char *l = "/tmp/.kbox-probe-symlink";
	unlink(l);
	if (symlink(p_hidden, l) < 0)
		return DENIED(errno, "symlink %s -> %s", l, p_hidden);
	struct res r = open_read(l);
	unlink(l);
	return r;
}

static struct res hidden_dirfd(void)
{
	char dir[4096], base[4096];
	split(p_hidden, dir, base);
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return DENIED(errno, "open %s", dir);
	int fd = openat(d, base, O_RDONLY | O_CLOEXEC);
	int e = errno;
	close(d);
	if (fd < 0)
		return DENIED(e, "openat(fd of %s, %s)", dir, base);
	close(fd);
	return ALLOWED("openat(fd of %s, %s)", dir, base);
}

static struct res hidden_procfd(void)
{
	char dir[4096], base[4096], p[8300];
	split(p_hidden, dir, base);
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return DENIED(errno, "open %s", dir);
	snprintf(p, sizeof p, "/proc/self/fd/%d/%s", d, base);
	struct res r = open_read(p);
	close(d);
	return r;
}

static struct res hidden_hardlink(void)
{
	const char *l = "/tmp/.kbox-probe-hardlink";
	unlink(l);
	if (link(p_hidden, l) < 0)
		return DENIED(errno, "link %s %s", p_hidden, l);
	struct res r = open_read(l);
	unlink(l);
	return r;
}

static struct res hidden_list(void)
{
	char dir[4096], base[4096];
	split(p_hidden, dir, base);
	DIR *d = opendir(dir);
	if (!d)
		return DENIED(errno, "opendir %s", dir);
	struct dirent *e;
	int found = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, base) == 0)
			found = 1;
	closedir(d);
	if (found)
		return ALLOWED("%s listed in %s", base, dir);
	return DENIED(ENOENT, "%s not listed in %s", base, dir);
}

/* ---- read-only paths ---- */

static struct res ro_create(void)
{
	char p[4200];
	struct stat st;
	if (stat(p_ro, &st) < 0)
		return SKIPPED("stat %s: %s", p_ro, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return SKIPPED("%s is not a directory", p_ro);
	snprintf(p, sizeof p, "%s/.kbox-probe-%d", strcmp(p_ro, "/") ? p_ro : "", getpid());
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return DENIED(errno, "create %s", p);
	close(fd);
	unlink(p);
	return ALLOWED("created (and removed) %s", p);
}

/* A regular file at or beneath p_ro (the first one of its directory). */
static int ro_file(char *out, size_t n)
{
	struct stat st;
	if (stat(p_ro, &st) < 0)
		return -1;
	if (S_ISREG(st.st_mode)) {
		snprintf(out, n, "%s", p_ro);
		return 0;
	}
	const char *dirs[] = {p_ro, "/etc", NULL};
	for (int i = 0; dirs[i]; i++) {
		if (i > 0 && strcmp(p_ro, "/") != 0)
			break; /* /etc only for the whole read-only root */
		DIR *d = opendir(dirs[i]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			snprintf(out, n, "%s/%s", strcmp(dirs[i], "/") ? dirs[i] : "", e->d_name);
			if (lstat(out, &st) == 0 && S_ISREG(st.st_mode)) {
				closedir(d);
				return 0;
			}
		}
		closedir(d);
	}
	return -1;
}

static struct res ro_write(void)
{
	char p[4200];
	if (ro_file(p, sizeof p) < 0)
		return SKIPPED("no regular file at or beneath %s", p_ro);
	/* Opened for writing, never written: allowed or not, nothing changes. */
	int fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return DENIED(errno, "open %s for writing", p);
	close(fd);
	return ALLOWED("opened %s for writing (nothing written)", p);
}

static struct res ro_chmod(void)
{
	struct stat st;
	if (stat(p_ro, &st) < 0)
		return SKIPPED("stat %s: %s", p_ro, strerror(errno));
	/* The same mode again: nothing changes when it is allowed. */
	if (chmod(p_ro, st.st_mode & 07777) < 0)
		return DENIED(errno, "chmod %s", p_ro);
	return ALLOWED("chmod %s (mode unchanged)", p_ro);
}

/* ---- binds ---- */

static struct res bind_list(void)
{
	DIR *d = opendir(p_bind);
	if (!d)
		return DENIED(errno, "opendir %s", p_bind);
	closedir(d);
	return ALLOWED("opendir %s", p_bind);
}

static struct res bind_escape(void)
{
	char l[4200], p[8400];
	snprintf(l, sizeof l, "%s/.kbox-probe-escape", p_rwbind);
	unlink(l);
	/* The marker's host path: resolved on the host it would leave the bind. */
	if (symlink(p_marker, l) < 0)
		return DENIED(errno, "symlink %s -> %s", l, p_marker);
	struct res r = read_marker(l);
	unlink(l);
	if (strcmp(r.observed, "allowed") == 0)
		return r;
	/* ../ from the bind's top, as many as it takes to reach any root. */
	int n = snprintf(p, sizeof p, "%s", p_rwbind);
	for (int i = 0; i < 16; i++)
		n += snprintf(p + n, sizeof p - n, "/..");
	snprintf(p + n, sizeof p - n, "%s", p_marker);
	r = read_marker(p);
	return r;
}

/* ---- host files through /proc and chroot ---- */

static struct res proc_root(const char *fmt, long pid)
{
	char p[4400];
	snprintf(p, sizeof p, fmt, pid, p_marker);
	return read_marker(p);
}
static struct res proc_root1(void) { return proc_root("/proc/%ld/root%s", 1); }
static struct res proc_rootkbox(void) { return proc_root("/proc/%ld/root%s", p_kbox); }
static struct res proc_rootparent(void) { return proc_root("/proc/%ld/root%s", p_parent); }
static struct res proc_selfroot(void) { return proc_root("/proc/self/root/../../../..%.0ld%s", 0); }

static struct res proc_cwdparent(void)
{
	/* The marker's path relative to kbox probe's working directory. */
	char p[8400];
	const char *rel = param("markerrel");
	if (!rel)
		return SKIPPED("no markerrel given");
	snprintf(p, sizeof p, "/proc/%ld/cwd/%s", p_parent, rel);
	return read_marker(p);
}

static struct res chroot_escape(void)
{
	const char *d = "/tmp/.kbox-probe-chroot";
	mkdir(d, 0700);
	pid_t pid = fork();
	if (pid < 0)
		return SKIPPED("fork: %s", strerror(errno));
	if (pid == 0) {
		if (chroot(d) < 0)
			_exit(4);
		for (int i = 0; i < 32; i++)
			chdir("..");
		chroot(".");
		char buf[256];
		if (readfile(p_marker, buf, sizeof buf) == 0 && p_token && strstr(buf, p_token))
			_exit(0);
		_exit(3);
	}
	int st;
	waitpid(pid, &st, 0);
	rmdir(d);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return ALLOWED("read the host marker after chroot, chdir .., chroot .");
	if (WIFEXITED(st) && WEXITSTATUS(st) != 3) {
		/* chroot itself failed: report its errno from a second try */
		if (chroot(d) < 0)
			return DENIED(errno, "chroot %s", d);
	}
	return DENIED(ENOENT, "the host marker was not reached");
}

/* ---- host processes ---- */

static struct res procs_visible(void)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%ld", p_parent);
	struct stat st;
	if (stat(p, &st) < 0)
		return DENIED(errno, "stat %s", p);
	return ALLOWED("%s exists (a host process of kbox probe's pid)", p);
}

static struct res procs_kill0(void)
{
	if (kill(p_parent, 0) < 0)
		return DENIED(errno, "kill(%ld, 0)", p_parent);
	return ALLOWED("kill(%ld, 0)", p_parent);
}

static struct res signal_host(void)
{
	/* SIGURG: ignored by default, harmless to kbox probe (Go). */
	if (kill(p_parent, SIGURG) < 0)
		return DENIED(errno, "kill(%ld, SIGURG)", p_parent);
	return ALLOWED("kill(%ld, SIGURG)", p_parent);
}

static struct res ptrace_host(void)
{
	if (ptrace(PTRACE_SEIZE, (pid_t)p_parent, 0, 0) < 0)
		return DENIED(errno, "ptrace(PTRACE_SEIZE, %ld)", p_parent);
	ptrace(PTRACE_DETACH, (pid_t)p_parent, 0, 0);
	return ALLOWED("ptrace(PTRACE_SEIZE, %ld)", p_parent);
}

/* ---- devices ---- */

static struct res dev_open(const char *p)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return DENIED(errno, "open %s", p);
	close(fd);
	return ALLOWED("open %s", p);
}
static struct res dev_sda(void) { return dev_open("/dev/sda"); }
static struct res dev_kvm(void) { return dev_open("/dev/kvm"); }
static struct res dev_mem(void) { return dev_open("/dev/mem"); }

static struct res dev_mknod(void)
{
	const char *p = "/tmp/.kbox-probe-blk";
	unlink(p);
	/* 8:0 is the host's first SCSI disk. */
	if (mknod(p, S_IFBLK | 0600, makedev(8, 0)) < 0)
		return DENIED(errno, "mknod %s b 8 0", p);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int e = errno;
	unlink(p);
	if (fd < 0)
		return DENIED(e, "mknod %s b 8 0 made, open", p);
	char b[512];
	ssize_t k = read(fd, b, sizeof b);
	e = errno;
	close(fd);
	if (k <= 0)
		return DENIED(k < 0 ? e : ENXIO, "block device 8:0 opened, nothing read");
	return ALLOWED("read %zd bytes of block device 8:0", k);
}

/* ---- network ---- */

static const struct {
	const char *id;
	struct res (*fn)(void);
	const char *need;
} probes[] = {
	{"hidden.open", hidden_open, "hidden"},
	{"hidden.stat", hidden_stat, "hidden"},
	{"hidden.list", hidden_list, "hidden"},
	{"hidden.dotdot", hidden_dotdot, "hidden"},
	{"hidden.symlink", hidden_symlink, "hidden"},
	{"hidden.dirfd", hidden_dirfd, "hidden"},
	{"hidden.procfd", hidden_procfd, "hidden"},
	{"hidden.hardlink", hidden_hardlink, "hidden"},
	{"readonly.create", ro_create, "ro"},
	{"readonly.write", ro_write, "ro"},
	{"readonly.chmod", ro_chmod, "ro"},
	{"bind.list", bind_list, "bind"},
	{"bind.escape", bind_escape, "rwbind"},
	{"proc.root1", proc_root1, "marker"},
	{"proc.rootkbox", proc_rootkbox, "marker"},
	{"proc.rootparent", proc_rootparent, "marker"},
	{"proc.selfroot", proc_selfroot, "marker"},
	{"proc.cwdparent", proc_cwdparent, "marker"},
	{"chroot.escape", chroot_escape, "marker"},
	{"inproc.gadget", inproc_gadget, "marker"},
	{"procs.visible", procs_visible, "parent"},
	{"procs.kill0", procs_kill0, "parent"},
	{"signal.host", signal_host, "parent"},
	{"ptrace.host", ptrace_host, "parent"},
	{"dev.sda", dev_sda, NULL},
	{"dev.kvm", dev_kvm, NULL},
	{"dev.mem", dev_mem, NULL},
	{"dev.mknod", dev_mknod, NULL},
	{"net.loopback", net_loopback, "port"},
	{"net.host", net_host, "port"},
	{"net.metadata", net_metadata, NULL},
	{"net.outside", net_outside, NULL},
	{"setuid.host", setuid_host, NULL},
	{"limit.file_size", limit_fsize, "fsize"},
	{"limit.processes", limit_procs, "procs"},
	{"limit.image_writes", limit_image_writes, "iwdir"},
	{"limit.quota", limit_quota, "quota_nr"},
	{"sys.unshare", sys_unshare, NULL},
	{"sys.clonens", sys_clonens, NULL},
	{"sys.bpf", sys_bpf, NULL},
	{"sys.perf_event_open", sys_perf, NULL},
	{"sys.keyctl", sys_keyctl, NULL},
	{"sys.io_uring", sys_io_uring, NULL},
	{"sys.mount", sys_mount, NULL},
};

int main(int argc, char **argv)
{
	probe_argv = argv + 1;
	if (argc == 2 && strcmp(argv[1], "--suid-child") == 0)
		return suid_child();
	p_token = param("token");
	p_marker = param("marker");
	p_hidden = param("hidden");
	p_ro = param("ro");
	p_bind = param("bind");
	p_rwbind = param("rwbind");
	p_kbox = lparam("kbox");
	p_parent = lparam("parent");
	p_port = lparam("port");
	p_fsize = lparam("fsize");
	p_procs = lparam("procs");
	p_quota_nr = lparam("quota_nr");
	p_quota_n = lparam("quota_n");
	p_quota_errno = lparam("quota_errno");
	int i = 1;
	while (i < argc && strcmp(argv[i], "--") != 0)
		i++;
	for (i++; i < argc; i++) {
		size_t j;
		for (j = 0; j < sizeof probes / sizeof probes[0]; j++)
			if (strcmp(probes[j].id, argv[i]) == 0)
				break;
		if (j == sizeof probes / sizeof probes[0]) {
			emit(argv[i], SKIPPED("unknown to this kbox-probe"));
			continue;
		}
		if (probes[j].need && !param(probes[j].need)) {
			emit(argv[i], SKIPPED("no %s given", probes[j].need));
			continue;
		}
		emit(argv[i], probes[j].fn());
	}
	return 0;
}
