/*
 * inoflags DIR: the inode flags of chattr and lsattr (FS_IOC_GETFLAGS,
 * FS_IOC_SETFLAGS) on a file made in DIR and opened read-write, one line
 * per check ("label result"), as root: what the append-only and immutable
 * attributes refuse (a write open without O_APPEND, setxattr, unlink,
 * rename, chmod), what they allow, and the flags read back through another
 * fd; then, as uid 65534, a change by a user who is not the owner. It
 * never forks, so that it runs in every tier (the user change comes last).
 *
 * inoflags append FILE: makes FILE append-only through an fd open for
 * writing, appends "two\n" through a new O_APPEND open, writes "X" at
 * offset 0 through the first fd (which Linux allows: the attribute is
 * checked at open), and clears the attribute. "inoflags append-ro FILE"
 * does the same through a read-only fd, with no write at offset 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "check.h"

/* <linux/fs.h>'s, which musl's headers lack. */
#define FS_IOC_GETFLAGS _IOR('f', 1, long)
#define FS_IOC_SETFLAGS _IOW('f', 2, long)
#define FS_IMMUTABLE_FL 0x00000010
#define FS_APPEND_FL 0x00000020

static int getflags(int fd)
{
	int v = -1;
	if (ioctl(fd, FS_IOC_GETFLAGS, &v) < 0)
		return -1;
	return v;
}

static long setflags(int fd, int v) { return ioctl(fd, FS_IOC_SETFLAGS, &v); }

static long openclose(const char *p, int flags)
{
	int fd = open(p, flags);
	if (fd >= 0)
		close(fd);
	return fd;
}

/* attr sets flag on the file and checks what it refuses and allows. */
static void attr(const char *name, int fd, const char *p, const char *p2, int flag)
{
	int base = getflags(fd);
	printf("%s set %s\n", name, outcome(setflags(fd, base | flag)));
	int other = open(p, O_RDONLY);
	int got = getflags(other);
	printf("%s read back through another fd %s\n", name, got >= 0 && (got & flag) ? "set" : "unset");
	close(other);
	printf("%s open O_WRONLY %s\n", name, outcome(openclose(p, O_WRONLY)));
	printf("%s open O_WRONLY|O_APPEND %s\n", name, outcome(openclose(p, O_WRONLY | O_APPEND)));
	printf("%s setxattr %s\n", name, outcome(setxattr(p, "user.k", "v", 1, 0)));
	printf("%s chmod %s\n", name, outcome(chmod(p, 0640)));
	printf("%s rename %s\n", name, outcome(rename(p, p2)));
	printf("%s unlink %s\n", name, outcome(unlink(p)));
	printf("%s clear %s\n", name, outcome(setflags(fd, base)));
	got = getflags(fd);
	printf("%s cleared %s\n", name, got >= 0 && !(got & flag) ? "yes" : "no");
	printf("%s setxattr after %s\n", name, outcome(setxattr(p, "user.k", "v", 1, 0)));
}

static int appends(const char *p, int rw)
{
	int fd = open(p, rw ? O_RDWR : O_RDONLY);
	int base = getflags(fd);
	if (fd < 0 || base < 0 || setflags(fd, base | FS_APPEND_FL) < 0) {
		printf("set append %s\n", outcome(-1));
		return 1;
	}
	int a = open(p, O_WRONLY | O_APPEND);
	if (a < 0 || write(a, "two\n", 4) != 4 || close(a) < 0)
		printf("append %s\n", outcome(-1));
	if (rw && pwrite(fd, "X", 1, 0) != 1)
		printf("write at 0 %s\n", outcome(-1));
	if (setflags(fd, base) < 0 || close(fd) < 0)
		printf("clear %s\n", outcome(-1));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && !strcmp(argv[1], "append"))
		return appends(argv[2], 1);
	if (argc >= 3 && !strcmp(argv[1], "append-ro"))
		return appends(argv[2], 0);
	char p[512], p2[512];
	snprintf(p, sizeof p, "%s/inoflags.file", argv[1]);
	snprintf(p2, sizeof p2, "%s/inoflags.moved", argv[1]);
	unlink(p);
	unlink(p2);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		printf("open %s\n", outcome(fd));
		return 1;
	}
	write(fd, "data\n", 5);
	int got = getflags(fd);
	printf("getflags %s\n", got >= 0 ? "ok" : outcome(got));
	printf("getflags bad pointer %s\n", outcome(ioctl(fd, FS_IOC_GETFLAGS, (void *)8)));
	printf("setflags bad pointer %s\n", outcome(ioctl(fd, FS_IOC_SETFLAGS, (void *)8)));
	attr("append", fd, p, p2, FS_APPEND_FL);
	attr("immutable", fd, p, p2, FS_IMMUTABLE_FL);
	int path = open(p, O_PATH);
	printf("getflags O_PATH %s\n", outcome(getflags(path) >= 0 ? 0 : -1));
	int dir = open(argv[1], O_RDONLY | O_DIRECTORY);
	printf("getflags directory %s\n", outcome(getflags(dir) >= 0 ? 0 : -1));
	int pfd[2];
	pipe(pfd);
	printf("getflags pipe %s\n", outcome(getflags(pfd[0]) >= 0 ? 0 : -1));
	/* A user who does not own the file may not change its flags. */
	if (syscall(SYS_setresuid, 65534, 65534, 65534) < 0) {
		printf("setresuid %s\n", outcome(-1));
		return 1;
	}
	printf("nobody set append %s\n", outcome(setflags(fd, (got < 0 ? 0 : got) | FS_APPEND_FL)));
	printf("nobody getflags %s\n", getflags(fd) >= 0 ? "ok" : outcome(-1));
	return 0;
}
