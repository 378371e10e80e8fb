/*
 * xattr: extended attributes through every form of the calls, one line per
 * check ("label: result"), for comparing kbox with Linux. It never forks,
 * so that it runs in every tier. Each MODE DIR pair runs in order:
 *
 *   xattr own DIR      as any user, on files it makes in DIR (made if
 *                      missing): user.*, trusted.*, security.*, POSIX ACLs,
 *                      every error, by path, l* and fd (a shadow, a
 *                      directory, O_PATH, a pipe, sockets, a FIFO, a
 *                      memfd, /dev/fd/N, /proc/self/fd/N), then /proc
 *                      and /dev/null
 *   xattr prep DIR     as root: files for "other" (root's files, an ACL
 *                      that lets uid 1000 read a 0600 file, a sticky
 *                      directory, DIR/u owned by 1000)
 *   xattr other DIR    as uid 1000, on prep's files
 *   xattr uid UID      become UID (group UID, no other group), for
 *                      "other" after "prep" in one process
 *   xattr hostf FILE   a file the test gave user.h, trusted.h, security.h
 *   xattr rofs FILE    on a read-only filesystem
 *
 * Lines starting with "ns " are about the trusted, security and system
 * namespaces, which a bind (-b) does not pass to the host; a list prints
 * its user.* names and its other names on two lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "check.h"

static int ns; /* the next line is about a namespace binds do not pass */

static void line(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *label, const char *fmt, ...)
{
	va_list ap;
	printf("%s%s: ", ns ? "ns " : "", label);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	ns = 0;
}

/* res prints a call's result: ok and its value, or the errno. */
static void res(const char *label, long r)
{
	if (r < 0)
		line(label, "%s", errname(errno));
	else
		line(label, "ok %ld", r);
}

/* val prints a get's result with the value (printable bytes). */
static void val(const char *label, long r, const char *buf)
{
	if (r < 0) {
		line(label, "%s", errname(errno));
		return;
	}
	char s[80];
	long n = r < 70 ? r : 70;
	for (long i = 0; i < n; i++)
		s[i] = buf[i] >= 32 && buf[i] < 127 ? buf[i] : '.';
	s[n] = 0;
	line(label, "ok %ld %s", r, s);
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* names prints a list's result: its user.* names, then (an ns line) the
 * others, each sorted. */
static void names(const char *label, long r, char *buf)
{
	if (r < 0) {
		line(label, "%s", errname(errno));
		return;
	}
	char *v[256];
	int n = 0;
	for (char *p = buf; p < buf + r && n < 256; p += strlen(p) + 1)
		v[n++] = p;
	qsort(v, n, sizeof v[0], cmpstr);
	char u[4096] = "", o[4096] = "";
	for (int i = 0; i < n; i++) {
		char *d = strncmp(v[i], "user.", 5) == 0 ? u : o;
		if (*d)
			strcat(d, ",");
		strncat(d, v[i], 200);
	}
	char l[128];
	snprintf(l, sizeof l, "%s user", label);
	line(l, "[%s]", u);
	snprintf(l, sizeof l, "%s other", label);
	ns = 1;
	line(l, "[%s]", o);
}

static char buf[70000];

/* get, lget, fget, set... print their call's result. */
static void get(const char *label, const char *p, const char *name)
{
	val(label, getxattr(p, name, buf, sizeof buf), buf);
}
static void lget(const char *label, const char *p, const char *name)
{
	val(label, lgetxattr(p, name, buf, sizeof buf), buf);
}
static void fget(const char *label, int fd, const char *name)
{
	val(label, fgetxattr(fd, name, buf, sizeof buf), buf);
}
static void set(const char *label, const char *p, const char *name, const char *v, int flags)
{
	res(label, setxattr(p, name, v, strlen(v), flags));
}
static void lset(const char *label, const char *p, const char *name, const char *v, int flags)
{
	res(label, lsetxattr(p, name, v, strlen(v), flags));
}
static void list(const char *label, const char *p)
{
	names(label, listxattr(p, buf, sizeof buf), buf);
}
static void llist(const char *label, const char *p)
{
	names(label, llistxattr(p, buf, sizeof buf), buf);
}
static void flist(const char *label, int fd)
{
	names(label, flistxattr(fd, buf, sizeof buf), buf);
}

static void mode(const char *label, const char *p)
{
	struct stat st;
	if (stat(p, &st) != 0)
		line(label, "%s", errname(errno));
	else
		line(label, "%04o", (unsigned)(st.st_mode & 07777));
}

/* A POSIX ACL in the xattr format (linux/posix_acl_xattr.h). */
enum { A_USER_OBJ = 1, A_USER = 2, A_GROUP_OBJ = 4, A_GROUP = 8, A_MASK = 0x10, A_OTHER = 0x20 };
struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};
struct acl {
	uint32_t version;
	struct acl_entry e[5];
};

/* acl_user is rw- for the owner, PERM for uid UID, --- for the group, PERM
 * as the mask, --- for others. */
static struct acl acl_user(uint32_t uid, uint16_t perm)
{
	struct acl a = {2, {{A_USER_OBJ, 6, -1}, {A_USER, perm, uid}, {A_GROUP_OBJ, 0, -1}, {A_MASK, perm, -1}, {A_OTHER, 0, -1}}};
	return a;
}

static void mkdirs(const char *dir)
{
	char p[4096];
	snprintf(p, sizeof p, "%s", dir);
	for (char *s = p + 1; *s; s++) {
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0755);
			*s = '/';
		}
	}
	if (mkdir(p, 0755) != 0 && errno != EEXIST) {
		printf("mkdir %s: %s\n", dir, errname(errno));
		exit(2);
	}
}

static int mkfile(const char *p, int mode, const char *data)
{
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, mode);
	if (fd < 0 || write(fd, data, strlen(data)) < 0)
		return -1;
	fchmod(fd, mode);
	return close(fd);
}

static void own(const char *dir)
{
	char s[300];
	mkdirs(dir);
	if (chdir(dir) != 0)
		exit(2);
	mkfile("f", 0644, "data\n");
	mkfile("ro", 0444, "ro\n");
	mkdir("d", 0755);
	symlink("f", "l");
	mkfifo("p", 0644);

	/* by path: values, sizes and flags */
	set("set user.a", "f", "user.a", "v1", 0);
	get("get user.a", "f", "user.a");
	res("get size 0", getxattr("f", "user.a", NULL, 0));
	res("get size 1", getxattr("f", "user.a", buf, 1));
	get("get missing", "f", "user.none");
	set("set create existing", "f", "user.a", "x", XATTR_CREATE);
	set("set replace missing", "f", "user.b", "x", XATTR_REPLACE);
	set("set replace", "f", "user.a", "v2", XATTR_REPLACE);
	get("get replaced", "f", "user.a");
	set("set create", "f", "user.c", "c", XATTR_CREATE);
	set("set bad flags", "f", "user.c", "c", 4);
	res("set empty value", setxattr("f", "user.e", "", 0, 0));
	get("get empty value", "f", "user.e");
	res("set 65537 bytes", setxattr("f", "user.big", buf, 65537, 0));
	memset(buf, 'x', 3000);
	res("set 3000 bytes", setxattr("f", "user.mid", buf, 3000, 0));
	memset(buf, 0, 3000);
	long n = getxattr("f", "user.mid", buf, sizeof buf);
	line("get 3000 bytes", "%ld %s", n, n == 3000 && buf[0] == 'x' && buf[2999] == 'x' ? "same" : "differs");
	res("set 65536 bytes", setxattr("f", "user.max", buf, 65536, 0));
	/* names */
	set("set name empty", "f", "", "v", 0);
	memset(s, 'n', 256);
	s[256] = 0;
	memcpy(s, "user.", 5);
	set("set name 256", "f", s, "v", 0);
	s[255] = 0;
	set("set name 255", "f", s, "v", 0);
	get("get name 255", "f", s);
	res("remove name 255", removexattr("f", s));
	set("set unknown namespace", "f", "foo.bar", "v", 0);
	set("set user without dot", "f", "user", "v", 0);
	set("set user. alone", "f", "user.", "v", 0);
	get("get unknown namespace", "f", "os2.x");
	/* bad pointers */
	res("set bad name", syscall(SYS_setxattr, "f", (char *)8, "v", 1, 0));
	res("set bad value", syscall(SYS_setxattr, "f", "user.a", (char *)8, 4, 0));
	res("set bad path", syscall(SYS_setxattr, (char *)8, "user.a", "v", 1, 0));
	res("get bad buffer", syscall(SYS_getxattr, "f", "user.a", (char *)8, 64));
	res("get NULL buffer", syscall(SYS_getxattr, "f", "user.a", NULL, 64));
	res("list bad buffer", syscall(SYS_listxattr, "f", (char *)8, 4096));
	res("get bad name bad fd", syscall(SYS_fgetxattr, -1, (char *)8, buf, 64));
	/* lists */
	res("list size 0", listxattr("f", NULL, 0));
	res("list size 1", listxattr("f", buf, 1));
	list("list f", "f");
	res("remove user.c", removexattr("f", "user.c"));
	res("remove user.c again", removexattr("f", "user.c"));
	/* paths */
	get("get no file", "nofile", "user.a");
	get("get file/x", "f/x", "user.a");
	get("get file/", "f/", "user.a");
	get("get empty path", "", "user.a");
	set("set dir", "d", "user.a", "dv", 0);
	get("get dir", "d", "user.a");
	get("get dir/", "d/", "user.a");
	/* symlinks */
	lset("lset link", "l", "user.a", "x", 0);
	lget("lget link", "l", "user.a");
	llist("llist link", "l");
	res("lremove link", lremovexattr("l", "user.a"));
	set("set through link", "l", "user.vialink", "vl", 0);
	get("get set through link", "f", "user.vialink");
	lget("lget regular file", "f", "user.a");
	/* a FIFO */
	get("get fifo", "p", "user.a");
	set("set fifo", "p", "user.a", "x", 0);
	list("list fifo", "p");
	/* a read-only file of one's own */
	set("set 0444 file", "ro", "user.a", "x", 0);
	get("get 0444 file", "ro", "user.a");

	/* trusted, security */
	ns = 1;
	set("set trusted", "f", "trusted.t", "tv", 0);
	ns = 1;
	get("get trusted", "f", "trusted.t");
	ns = 1;
	set("set security", "f", "security.s", "sv", 0);
	ns = 1;
	get("get security", "f", "security.s");
	ns = 1;
	lset("lset trusted on link", "l", "trusted.t", "tl", 0);
	ns = 1;
	lget("lget trusted on link", "l", "trusted.t");
	ns = 1;
	set("set security.capability junk", "f", "security.capability", "junk", 0);
	list("list f with namespaces", "f");
	ns = 1;
	res("remove security", removexattr("f", "security.s"));
	ns = 1;
	res("remove security.capability", removexattr("f", "security.capability"));

	/* POSIX ACLs */
	struct acl a = acl_user(4242, 4);
	ns = 1;
	res("set acl", setxattr("f", "system.posix_acl_access", &a, sizeof a, 0));
	ns = 1;
	mode("mode after acl", "f");
	ns = 1;
	res("get acl size", getxattr("f", "system.posix_acl_access", NULL, 0));
	memset(buf, 0, sizeof a);
	ns = 1;
	n = getxattr("f", "system.posix_acl_access", buf, sizeof buf);
	line("get acl", "%ld %s", n, n == sizeof a && memcmp(buf, &a, sizeof a) == 0 ? "same" : "differs");
	list("list f with acl", "f");
	struct acl bad = a;
	bad.version = 1;
	ns = 1;
	res("set acl bad version", setxattr("f", "system.posix_acl_access", &bad, sizeof bad, 0));
	ns = 1;
	res("set acl short", setxattr("f", "system.posix_acl_access", &a, 6, 0));
	ns = 1;
	res("set default acl on a file", setxattr("f", "system.posix_acl_default", &a, sizeof a, 0));
	ns = 1;
	res("set default acl on a dir", setxattr("d", "system.posix_acl_default", &a, sizeof a, 0));
	mkfile("d/inh", 0666, "x");
	ns = 1;
	res("inherited acl size", getxattr("d/inh", "system.posix_acl_access", NULL, 0));
	ns = 1;
	mode("inherited mode", "d/inh");
	/* a default ACL replaces the umask for what is made beneath it */
	mode_t um = umask(077);
	close(open("d/um", O_CREAT | O_WRONLY, 0666));
	mkdir("d/umd", 0777);
	mkfifo("d/ump", 0666);
	close(open("um", O_CREAT | O_WRONLY, 0666));
	umask(um);
	ns = 1;
	mode("create under a default acl, umask 077", "d/um");
	ns = 1;
	mode("mkdir under a default acl, umask 077", "d/umd");
	ns = 1;
	mode("mkfifo under a default acl, umask 077", "d/ump");
	mode("create without a default acl, umask 077", "um");
	ns = 1;
	res("lset acl on link", lsetxattr("l", "system.posix_acl_access", &a, sizeof a, 0));
	ns = 1;
	set("set system.foo", "f", "system.foo", "v", 0);
	ns = 1;
	res("remove acl", removexattr("f", "system.posix_acl_access"));
	ns = 1;
	mode("mode after acl removed", "f");

	/* by fd: a shadow of the image file, read-only: the attribute is
	 * the file's (the path sees it) */
	int fd = open("f", O_RDONLY);
	res("fset user.fd", fsetxattr(fd, "user.fd", "fv", 2, 0));
	get("get user.fd by path", "f", "user.fd");
	fget("fget user.a", fd, "user.a");
	res("fget size 0", fgetxattr(fd, "user.a", NULL, 0));
	res("fget size 1", fgetxattr(fd, "user.a", buf, 1));
	flist("flist", fd);
	res("fremove user.fd", fremovexattr(fd, "user.fd"));
	get("get removed by fd", "f", "user.fd");
	res("fremove missing", fremovexattr(fd, "user.fd"));
	snprintf(s, sizeof s, "/dev/fd/%d", fd);
	get("get /dev/fd/N", s, "user.a");
	lget("lget /dev/fd/N", s, "user.a");
	snprintf(s, sizeof s, "/proc/self/fd/%d", fd);
	get("get /proc/self/fd/N", s, "user.a");
	ns = 1;
	set("fset trusted by /proc/self/fd/N", s, "trusted.fd", "t", 0);
	close(fd);
	res("fget closed fd", fgetxattr(fd, "user.a", buf, sizeof buf));
	res("fget fd -1", fgetxattr(-1, "user.a", buf, sizeof buf));
	res("fset closed fd", fsetxattr(fd, "user.a", "x", 1, 0));
	res("flist closed fd", flistxattr(fd, buf, sizeof buf));
	res("fremove closed fd", fremovexattr(fd, "user.a"));
	snprintf(s, sizeof s, "/dev/fd/%d", fd);
	get("get /dev/fd/N closed", s, "user.a");
	/* a shadow being written */
	fd = open("f", O_RDWR | O_APPEND);
	res("write", write(fd, "more\n", 5));
	res("fset on written file", fsetxattr(fd, "user.w", "w", 1, 0));
	get("get written file's", "f", "user.w");
	close(fd);
	/* a bigger file (a virtual fd when shadows are capped) */
	memset(buf, 'b', 9000);
	fd = open("big", O_CREAT | O_RDWR | O_TRUNC, 0644);
	res("write big", write(fd, buf, 9000));
	res("fset big", fsetxattr(fd, "user.big", "b", 1, 0));
	get("get big", "big", "user.big");
	close(fd);
	/* a directory fd */
	fd = open("d", O_RDONLY | O_DIRECTORY);
	res("fset dir", fsetxattr(fd, "user.dfd", "d", 1, 0));
	fget("fget dir", fd, "user.a");
	flist("flist dir", fd);
	close(fd);
	/* O_PATH: EBADF for the f* calls, a path through it works */
	fd = open("f", O_PATH);
	res("fget O_PATH", fgetxattr(fd, "user.a", buf, sizeof buf));
	res("fset O_PATH", fsetxattr(fd, "user.a", "x", 1, 0));
	res("flist O_PATH", flistxattr(fd, buf, sizeof buf));
	res("fremove O_PATH", fremovexattr(fd, "user.a"));
	snprintf(s, sizeof s, "/proc/self/fd/%d", fd);
	get("get through O_PATH's /proc link", s, "user.a");
	close(fd);
	fd = open("d", O_PATH | O_DIRECTORY);
	res("fget O_PATH dir", fgetxattr(fd, "user.a", buf, sizeof buf));
	close(fd);
	fd = open("l", O_PATH | O_NOFOLLOW);
	snprintf(s, sizeof s, "/proc/self/fd/%d", fd);
	get("get O_PATH link's /proc link", s, "user.a");
	close(fd);
	/* a pipe */
	int pp[2];
	if (pipe(pp) == 0) {
		fget("fget pipe", pp[0], "user.a");
		res("fset pipe", fsetxattr(pp[1], "user.a", "x", 1, 0));
		flist("flist pipe", pp[0]);
		ns = 1;
		fget("fget pipe trusted", pp[0], "trusted.a");
		ns = 1;
		res("fset pipe security", fsetxattr(pp[1], "security.a", "x", 1, 0));
		close(pp[0]);
		close(pp[1]);
	}
	/* sockets: a host socket pair, an internet socket (LKL's in kbox) */
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0) {
		fget("fget unix socket", sp[0], "user.a");
		res("fset unix socket", fsetxattr(sp[0], "user.a", "x", 1, 0));
		fget("fget unix socket protocol", sp[0], "system.sockprotoname");
		flist("flist unix socket", sp[0]);
		ns = 1;
		fget("fget unix socket trusted", sp[0], "trusted.a");
		close(sp[0]);
		close(sp[1]);
	}
	int so = socket(AF_INET, SOCK_STREAM, 0);
	fget("fget tcp socket protocol", so, "system.sockprotoname");
	fget("fget tcp socket", so, "user.a");
	flist("flist tcp socket", so);
	close(so);
	/* an fd of the FIFO: its node's attributes */
	fd = open("p", O_RDONLY | O_NONBLOCK);
	fget("fget fifo fd", fd, "user.a");
	res("fset fifo fd", fsetxattr(fd, "user.a", "x", 1, 0));
	ns = 1;
	res("fset fifo fd trusted", fsetxattr(fd, "trusted.f", "f", 1, 0));
	ns = 1;
	get("get fifo trusted by path", "p", "trusted.f");
	close(fd);
	/* a memfd of one's own */
	fd = memfd_create("x", 0);
	res("fset memfd", fsetxattr(fd, "user.m", "m", 1, 0));
	fget("fget memfd", fd, "user.m");
	close(fd);
	/* hard links and renames keep them */
	link("f", "f2");
	get("get hard link", "f2", "user.a");
	rename("f2", "f3");
	get("get renamed", "f3", "user.a");

	/* /proc and /dev */
	get("get /proc/self/status", "/proc/self/status", "user.a");
	set("set /proc/self/status", "/proc/self/status", "user.a", "x", 0);
	list("list /proc/self/status", "/proc/self/status");
	res("remove /proc/self/status", removexattr("/proc/self/status", "user.a"));
	ns = 1;
	get("get /proc/self/status trusted", "/proc/self/status", "trusted.a");
	lget("lget /proc/self/exe", "/proc/self/exe", "user.a");
	lset("lset /proc/self/exe", "/proc/self/exe", "user.a", "x", 0);
	llist("llist /proc/self/exe", "/proc/self/exe");
	get("get /proc/cpuinfo", "/proc/cpuinfo", "user.a");
	set("set /proc/cpuinfo", "/proc/cpuinfo", "user.a", "x", 0);
	list("list /proc/cpuinfo", "/proc/cpuinfo");
	get("get /dev/null", "/dev/null", "user.a");
	set("set /dev/null", "/dev/null", "user.a", "x", 0);
	list("list /dev/null", "/dev/null");
	fd = open("/dev/null", O_RDONLY);
	fget("fget /dev/null", fd, "user.a");
	flist("flist /dev/null", fd);
	close(fd);
	fd = open("/proc/self/status", O_RDONLY);
	fget("fget /proc/self/status", fd, "user.a");
	res("fset /proc/self/status", fsetxattr(fd, "user.a", "x", 1, 0));
	flist("flist /proc/self/status", fd);
	close(fd);
}

static void prep(const char *dir)
{
	mkdirs(dir);
	if (chdir(dir) != 0)
		exit(2);
	res("prep rootf", mkfile("rootf", 0644, "root\n"));
	set("prep rootf user.r", "rootf", "user.r", "root", 0);
	set("prep rootf trusted.t", "rootf", "trusted.t", "t", 0);
	set("prep rootf security.s", "rootf", "security.s", "s", 0);
	res("prep secret", mkfile("secret", 0600, "secret\n"));
	struct acl a = acl_user(1000, 4);
	res("prep secret acl", setxattr("secret", "system.posix_acl_access", &a, sizeof a, 0));
	mode("prep secret mode", "secret");
	res("prep plain", mkfile("plain", 0600, "plain\n"));
	mkdir("sticky", 01777);
	res("prep sticky", chmod("sticky", 01777));
	set("prep sticky user.s", "sticky", "user.s", "s", 0);
	mkdir("u", 0755);
	res("prep u", chown("u", 1000, 1000));
}

static void other(const char *dir)
{
	if (chdir(dir) != 0)
		exit(2);
	get("other get rootf user.r", "rootf", "user.r");
	set("other set rootf user.x", "rootf", "user.x", "x", 0);
	res("other remove rootf user.r", removexattr("rootf", "user.r"));
	ns = 1;
	get("other get rootf trusted.t", "rootf", "trusted.t");
	ns = 1;
	get("other get rootf security.s", "rootf", "security.s");
	ns = 1;
	set("other set rootf security.s", "rootf", "security.s", "x", 0);
	ns = 1;
	set("other set rootf trusted.x", "rootf", "trusted.x", "x", 0);
	list("other list rootf", "rootf");
	struct acl a = acl_user(1000, 6);
	ns = 1;
	res("other set rootf acl", setxattr("rootf", "system.posix_acl_access", &a, sizeof a, 0));
	/* the ACL prep gave secret lets uid 1000 read it */
	int fd = open("secret", O_RDONLY);
	char b[64] = "";
	if (fd >= 0) {
		long n = read(fd, b, sizeof b - 1);
		b[n > 0 ? n : 0] = 0;
		b[strcspn(b, "\n")] = 0;
		close(fd);
		line("other read secret", "ok %s", b);
	} else {
		line("other read secret", "%s", errname(errno));
	}
	res("other open secret for writing", open("secret", O_WRONLY));
	res("other access secret R_OK", access("secret", R_OK));
	res("other access secret W_OK", access("secret", W_OK));
	res("other open plain", open("plain", O_RDONLY));
	ns = 1;
	res("other get secret acl size", getxattr("secret", "system.posix_acl_access", NULL, 0));
	set("other set sticky user.y", "sticky", "user.y", "y", 0);
	get("other get sticky user.s", "sticky", "user.s");
}

static void hostf(const char *p)
{
	list("hostf list", p);
	get("hostf get user.h", p, "user.h");
	ns = 1;
	get("hostf get trusted.h", p, "trusted.h");
	ns = 1;
	get("hostf get security.h", p, "security.h");
	ns = 1;
	res("hostf remove security.h", removexattr(p, "security.h"));
	set("hostf set user.n", p, "user.n", "n", 0);
	res("hostf remove user.n", removexattr(p, "user.n"));
	int fd = open(p, O_RDONLY);
	flist("hostf flist", fd);
	res("hostf fset user.n", fsetxattr(fd, "user.n", "n", 1, 0));
	ns = 1;
	res("hostf fset trusted.n", fsetxattr(fd, "trusted.n", "n", 1, 0));
	res("hostf fremove user.n", fremovexattr(fd, "user.n"));
	close(fd);
}

static void rofs(const char *p)
{
	get("rofs get", p, "user.none");
	set("rofs set", p, "user.a", "x", 0);
	res("rofs remove", removexattr(p, "user.a"));
	int fd = open(p, O_RDONLY);
	res("rofs fset", fsetxattr(fd, "user.a", "x", 1, 0));
	close(fd);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *m = argv[i], *d = argv[i + 1];
		if (strcmp(m, "own") == 0)
			own(d);
		else if (strcmp(m, "prep") == 0)
			prep(d);
		else if (strcmp(m, "other") == 0)
			other(d);
		else if (strcmp(m, "uid") == 0) {
			gid_t g = atoi(d);
			if (setgroups(1, &g) || setresgid(g, g, g) || setresuid(atoi(d), atoi(d), atoi(d))) {
				printf("uid %s: %s\n", d, errname(errno));
				return 2;
			}
		} else if (strcmp(m, "hostf") == 0)
			hostf(d);
		else if (strcmp(m, "rofs") == 0)
			rofs(d);
		else {
			fprintf(stderr, "xattr: unknown mode %s\n", m);
			return 2;
		}
	}
	return 0;
}
