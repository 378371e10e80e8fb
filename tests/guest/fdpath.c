/*
 * What an O_PATH fd allows, one line per check ("name result"): run in a
 * scratch directory, natively and under kbox, the output must be the same.
 * readlinkat(fd, "") reads the symlink an O_PATH|O_NOFOLLOW fd names;
 * ioctl and fgetxattr on an O_PATH fd are EBADF.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *en(long r)
{
	static char b[32];
	if (r >= 0)
		return "ok";
	switch (errno) {
	case EBADF: return "EBADF";
	case ENOENT: return "ENOENT";
	case EINVAL: return "EINVAL";
	case ENOTTY: return "ENOTTY";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	}
	snprintf(b, sizeof b, "errno%d", errno);
	return b;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int f = open("target", O_CREAT | O_WRONLY | O_TRUNC, 0644);
	close(f);
	unlink("link");
	if (symlink("target", "link") != 0)
		return 2;
	mkdir("dir", 0755);
	char buf[64] = {0};
	int l = open("link", O_PATH | O_NOFOLLOW);
	long n = readlinkat(l, "", buf, sizeof buf);
	printf("readlinkat O_PATH symlink \"\" %s %s\n", en(n), n > 0 ? buf : "");
	int d = open("dir", O_PATH | O_DIRECTORY);
	printf("readlinkat O_PATH dir \"\" %s\n", en(readlinkat(d, "", buf, sizeof buf)));
	int p = open("target", O_PATH);
	int arg = 0;
	printf("ioctl O_PATH %s\n", en(ioctl(p, FIONREAD, &arg)));
	printf("ioctl O_PATH dir %s\n", en(ioctl(d, FIONREAD, &arg)));
	printf("fgetxattr O_PATH %s\n", en(fgetxattr(p, "user.x", buf, sizeof buf)));
	printf("fgetxattr O_PATH dir %s\n", en(fgetxattr(d, "user.x", buf, sizeof buf)));
	printf("flistxattr O_PATH %s\n", en(flistxattr(p, buf, sizeof buf)));
	close(l);
	close(d);
	close(p);
	unlink("link");
	unlink("target");
	rmdir("dir");
	return 0;
}
