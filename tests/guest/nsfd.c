/*
 * /proc links opened as files, one line per check ("name result"):
 *   ns        open /proc/self/ns/NAME: an nsfs fd of the namespace
 *             (NS_GET_NSTYPE, its inode the link's number), ELOOP with
 *             O_NOFOLLOW, and the NS_GET_* errors of LTP ioctl_ns02-04;
 *   linkpath  open(O_PATH|O_NOFOLLOW) of /proc/PID/fd/N, cwd, exe and
 *             ns/net: an fd of the link itself (stat S_IFLNK,
 *             readlinkat(fd, "") its text, fexecve ELOOP), whose own fd
 *             link leads to the link: open ELOOP, a bind mount on the fd
 *             link's ENOENT (LTP mount08);
 *   setns     (kbox only) setns into a namespace fd, and into the user
 *             namespace NS_GET_USERNS gives for it: EPERM; listmount and
 *             statmount, which take a mount namespace's id: not served.
 * ns and linkpath print the same natively (as root) and under kbox.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "check.h"

#define NSIO 0xb7
#define NS_GET_USERNS _IO(NSIO, 0x1)
#define NS_GET_PARENT _IO(NSIO, 0x2)
#define NS_GET_NSTYPE _IO(NSIO, 0x3)
#define NS_GET_OWNER_UID _IO(NSIO, 0x4)

static void ns(void)
{
	static const struct {
		const char *name;
		int type;
	} all[] = {
		{"net", CLONE_NEWNET}, {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS},
		{"pid", CLONE_NEWPID}, {"mnt", CLONE_NEWNS}, {"user", CLONE_NEWUSER},
		{"cgroup", CLONE_NEWCGROUP},
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		char path[64], link[64] = "";
		snprintf(path, sizeof path, "/proc/self/ns/%s", all[i].name);
		readlink(path, link, sizeof link - 1);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		printf("ns %s open %s", all[i].name, outcome(fd));
		if (fd >= 0) {
			struct stat st;
			char want[64];
			long t = ioctl(fd, NS_GET_NSTYPE);
			printf(" type %s", t < 0 ? outcome(t) : t == all[i].type ? "right" : "wrong");
			fstat(fd, &st);
			snprintf(want, sizeof want, "%s:[%lu]", all[i].name, (unsigned long)st.st_ino);
			printf(" ino %s", strcmp(want, link) ? "differs" : "same");
			close(fd);
		}
		printf(" nofollow %s\n", outcome(open(path, O_RDONLY | O_NOFOLLOW)));
	}
	int fd = open("/proc/self/ns/uts", O_RDONLY);
	uid_t uid;
	printf("ns uts parent %s\n", outcome(ioctl(fd, NS_GET_PARENT)));
	printf("ns uts owner %s\n", outcome(ioctl(fd, NS_GET_OWNER_UID, &uid)));
	close(fd);
	fd = open("/proc/self/ns/user", O_RDONLY);
	printf("ns user userns %s\n", outcome(ioctl(fd, NS_GET_USERNS)));
	close(fd);
}

/* opath opens path O_PATH|O_NOFOLLOW and prints what the fd is. */
static void opath(const char *name, const char *path, const char *text, int mnt)
{
	char got[PATH_MAX], self[64], via[PATH_MAX];
	struct stat st;
	int p = open(path, O_PATH | O_NOFOLLOW);
	printf("linkpath %s open %s", name, outcome(p));
	if (p < 0) {
		printf("\n");
		return;
	}
	printf(" fstat %s", fstat(p, &st) ? outcome(-1) : S_ISLNK(st.st_mode) ? "link" : "notlink");
	long n = readlinkat(p, "", got, sizeof got - 1);
	got[n > 0 ? n : 0] = 0;
	printf(" readlinkat %s", n < 0 ? outcome(n) : strcmp(got, text) ? got : "text");
	snprintf(self, sizeof self, "/proc/self/fd/%d", p);
	n = readlink(self, via, sizeof via - 1);
	via[n > 0 ? n : 0] = 0;
	printf(" fdlink %s", n < 0 ? outcome(n) : strcmp(via, path) ? via : "path");
	printf(" reopen %s", outcome(open(self, O_RDONLY)));
	printf(" stat %s", stat(self, &st) ? outcome(-1) : S_ISLNK(st.st_mode) ? "link" : "notlink");
	char *argv[] = { "nsfd", NULL };
	printf(" fexecve %s", outcome(syscall(SYS_execveat, p, "", argv, NULL, AT_EMPTY_PATH)));
	if (mnt)
		printf(" mount %s", outcome(mount("bar", self, "", MS_BIND, 0)));
	printf("\n");
	close(p);
}

static void linkpath(void)
{
	char cwd[PATH_MAX], file[PATH_MAX + 8], path[64], nslink[64] = "";
	if (!getcwd(cwd, sizeof cwd))
		return;
	close(open("bar", O_CREAT | O_WRONLY, 0644));
	int fd = open("foo", O_CREAT | O_RDONLY | O_NONBLOCK, 0640);
	snprintf(file, sizeof file, "%s/foo", cwd);
	snprintf(path, sizeof path, "/proc/%d/fd/%d", getpid(), fd);
	opath("fd", path, file, 1);
	snprintf(path, sizeof path, "/proc/%d/cwd", getpid());
	opath("cwd", path, cwd, 0);
	char exe[PATH_MAX] = "";
	snprintf(path, sizeof path, "/proc/%d/exe", getpid());
	readlink(path, exe, sizeof exe - 1);
	opath("exe", path, exe, 0);
	snprintf(path, sizeof path, "/proc/%d/ns/net", getpid());
	readlink(path, nslink, sizeof nslink - 1);
	opath("ns", path, nslink, 0);
	close(fd);
}

static void do_setns(void)
{
	int fd = open("/proc/self/ns/net", O_RDONLY);
	printf("setns net %s\n", outcome(setns(fd, 0)));
	int u = ioctl(fd, NS_GET_USERNS);
	printf("setns userns %s\n", u < 0 ? outcome(u) : outcome(setns(u, CLONE_NEWUSER)));
	fd = open("/proc/self/ns/mnt", O_RDONLY);
	printf("setns mnt %s\n", outcome(setns(fd, CLONE_NEWNS)));
	/* listmount and statmount name mount namespaces by the id an nsfs
	 * fd gives (NS_MNT_GET_INFO): the host's mounts. */
	printf("listmount %s\n", outcome(syscall(458, 0L, 0L, 0L, 0L)));
	printf("statmount %s\n", outcome(syscall(457, 0L, 0L, 0L, 0L)));
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "ns"))
		ns();
	else if (argc >= 2 && !strcmp(argv[1], "linkpath"))
		linkpath();
	else if (argc >= 2 && !strcmp(argv[1], "setns"))
		do_setns();
	else {
		fprintf(stderr, "usage: nsfd ns|linkpath|setns\n");
		return 2;
	}
	return 0;
}
