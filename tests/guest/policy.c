/*
 * Attempts to get around kbox's path rules (--policy): one line per
 * attempt ("name result", result "ok" or the errno's name). Run by
 * tests/policy_test.go on an image holding /data/ro/f ("orig"),
 * /data/secret/key and the links /data/links/ro -> /data/ro/f,
 * /data/links/sec -> /data/secret, under a policy that hides
 * /data/secret and makes /data/ro read-only; without a policy every
 * attempt succeeds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static void res(const char *name, long r)
{
	const char *s = "ok";
	if (r < 0) {
		switch (errno) {
		case ENOENT: s = "ENOENT"; break;
		case EROFS: s = "EROFS"; break;
		case EPERM: s = "EPERM"; break;
		case EACCES: s = "EACCES"; break;
		case EXDEV: s = "EXDEV"; break;
		default: s = strerror(errno);
		}
	}
	printf("%s %s\n", name, s);
}

/* opened: a successful open is closed again; the fd is not kept. */
static long opened(long fd)
{
	if (fd >= 0)
		close((int)fd);
	return fd;
}

int main(void)
{
	char p[64];
	struct stat st;

	/* Hidden. */
	res("open-hidden", opened(open("/data/secret/key", O_RDONLY)));
	res("stat-hidden", stat("/data/secret", &st));
	res("dotdot-hidden", opened(open("/data/ro/../secret/key", O_RDONLY)));
	res("dotdot-out-of-hidden", opened(open("/data/secret/../ro/f", O_RDONLY)));
	res("link-dotdot-out-of-hidden", opened(open("/data/links/sec/../ro/f", O_RDONLY)));
	res("symlink-hidden", opened(open("/data/links/sec/key", O_RDONLY)));
	int data = open("/data", O_RDONLY | O_DIRECTORY);
	res("dirfd-hidden", opened(openat(data, "secret/key", O_RDONLY)));
	if (chdir("/data/ro") == 0)
		res("cwd-dotdot-hidden", opened(open("../secret/key", O_RDONLY)));

	/* Read-only. */
	int ro = open("/data/ro/f", O_RDONLY);
	char buf[8] = {0};
	res("read-ro", ro >= 0 ? read(ro, buf, sizeof buf - 1) : -1);
	printf("content %s\n", buf);
	res("write-ro", opened(open("/data/ro/f", O_WRONLY)));
	res("trunc-ro", opened(open("/data/ro/f", O_RDONLY | O_TRUNC)));
	res("relative-ro", opened(open("f", O_RDWR)));
	res("symlink-ro", opened(open("/data/links/ro", O_WRONLY | O_TRUNC)));
	int rodir = open("/data/ro", O_RDONLY | O_DIRECTORY);
	res("dirfd-ro", opened(openat(rodir, "f", O_RDWR)));
	res("dirfd-create-ro", opened(openat(rodir, "new", O_WRONLY | O_CREAT, 0644)));
	snprintf(p, sizeof p, "/proc/self/fd/%d", ro);
	res("procfd-ro", opened(open(p, O_WRONLY)));
	snprintf(p, sizeof p, "/dev/fd/%d", ro);
	res("devfd-ro", opened(open(p, O_RDWR)));
	res("fchmod-ro", fchmod(ro, 0666));
	res("chmod-ro", chmod("/data/ro/f", 0666));
	res("truncate-ro", truncate("/data/ro/f", 0));
	res("mkdir-ro", mkdir("/data/ro/d", 0755));
	res("symlinkat-ro", symlink("x", "/data/ro/sl"));
	snprintf(p, sizeof p, "/proc/self/fd/%d", ro);
	res("linkfd-ro", linkat(AT_FDCWD, p, AT_FDCWD, "/data/hl2", AT_SYMLINK_FOLLOW));
	res("unlink-ro", unlink("/data/ro/f"));
	res("hardlink-ro", link("/data/ro/f", "/data/hl"));
	res("rename-from-ro", rename("/data/ro/f", "/data/moved"));
	res("rename-into-ro", rename("/data/free0", "/data/ro/g"));
	res("rename-ro-dir", rename("/data/ro", "/data/ro2"));
	res("rename-parent", rename("/data", "/data2"));

	/* A bind mount would give the files a path no pattern names. */
	mkdir("/data/mnt", 0755);
	res("bind-mount-hidden", mount("/data/secret", "/data/mnt", NULL, MS_BIND, NULL));
	res("bind-mount-ro", mount("/data/ro", "/data/mnt", NULL, MS_BIND, NULL));
	res("bind-mount-parent", mount("/data", "/data/mnt", NULL, MS_BIND, NULL));

	/* Free: writes elsewhere work. */
	res("write-free", opened(open("/data/free", O_WRONLY | O_CREAT, 0644)));
	res("rename-free", rename("/data/free", "/data/free2"));
	return 0;
}
