/*
 * What an O_PATH fd allows, one line per check ("name result"): run in a
 * scratch directory, natively and under kbox, the output must be the same.
 * readlinkat(fd, "") reads the symlink an O_PATH|O_NOFOLLOW fd names;
 * ioctl and fgetxattr on an O_PATH fd are EBADF. An O_NOATIME open of
 * root's file by nobody is EPERM, also while root holds it open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "check.h"

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
	printf("readlinkat O_PATH symlink \"\" %s %s\n", outcome(n), n > 0 ? buf : "");
	int d = open("dir", O_PATH | O_DIRECTORY);
	printf("readlinkat O_PATH dir \"\" %s\n", outcome(readlinkat(d, "", buf, sizeof buf)));
	int p = open("target", O_PATH);
	int arg = 0;
	printf("ioctl O_PATH %s\n", outcome(ioctl(p, FIONREAD, &arg)));
	printf("ioctl O_PATH dir %s\n", outcome(ioctl(d, FIONREAD, &arg)));
	printf("fgetxattr O_PATH %s\n", outcome(fgetxattr(p, "user.x", buf, sizeof buf)));
	printf("fgetxattr O_PATH dir %s\n", outcome(fgetxattr(d, "user.x", buf, sizeof buf)));
	printf("flistxattr O_PATH %s\n", outcome(flistxattr(p, buf, sizeof buf)));

	/* O_NOATIME: the owner or CAP_FOWNER only */
	chmod(".", 0755);
	int w = open("target", O_WRONLY);
	printf("write %s\n", outcome(write(w, "data", 4)));
	int rd = open("target", O_RDONLY);
	printf("O_NOATIME owner %s\n", outcome(open("target", O_RDONLY | O_NOATIME)));
	pid_t c = fork();
	if (c == 0) {
		if (setgid(65534) || setuid(65534)) {
			printf("O_NOATIME other skip\n");
			_exit(0);
		}
		printf("O_NOATIME other %s\n", outcome(open("target", O_RDONLY | O_NOATIME)));
		printf("plain other %s\n", outcome(open("target", O_RDONLY)));
		_exit(0);
	}
	waitpid(c, NULL, 0);
	close(w);
	close(rd);
	close(l);
	close(d);
	close(p);
	unlink("link");
	unlink("target");
	rmdir("dir");
	return 0;
}
