/*
 * epollvirt: epoll_ctl, epoll_wait, splice and tee on fds kbox serves
 * from LKL (virtual fds: directories, and files above KBOX_SHADOW_MAX)
 * answer as Linux does. A directory or regular file cannot be polled
 * (EPERM), an O_PATH fd is not open for it (EBADF), a bad event pointer
 * is EFAULT first and an fd that is no epoll instance EINVAL; splice and
 * tee check the length, the flags and the access modes (EBADF) before
 * the kinds of file. One line per call, errno by name, compared with the
 * same program run natively (tests/epollvirt_test.go).
 *
 * Usage: epollvirt DIR [make]. DIR/f (10,000 bytes) is written unless it
 * exists; with "make" that is all. Written by another process that has
 * exited, it is a virtual fd above KBOX_SHADOW_MAX=4096.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static void show(const char *call, long r)
{
	if (r < 0)
		printf("%s: %s\n", call, errname(errno));
	else
		printf("%s: %ld\n", call, r);
}

int main(int argc, char **argv)
{
	static char zeros[10000];
	struct epoll_event ev = {.events = EPOLLIN}, out[1];
	char f[4096];
	int d, p, r, w, ep, pp[2], closed = 900;

	REQUIRE(argc >= 2, "usage: epollvirt DIR [make]");
	snprintf(f, sizeof f, "%s/f", argv[1]);
	mkdir(argv[1], 0755);
	if (access(f, F_OK) != 0) {
		w = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		REQUIRE(w >= 0 && write(w, zeros, sizeof zeros) == sizeof zeros, "write %s", f);
		close(w);
	}
	if (argc > 2 && strcmp(argv[2], "make") == 0)
		return 0;

	d = open(argv[1], O_RDONLY | O_DIRECTORY);
	p = open(argv[1], O_PATH);
	r = open(f, O_RDONLY);
	w = open(f, O_WRONLY);
	ep = epoll_create1(0);
	REQUIRE(d >= 0 && p >= 0 && r >= 0 && w >= 0 && ep >= 0 && pipe(pp) == 0, "opens");
	close(closed);

	show("add dir", epoll_ctl(ep, EPOLL_CTL_ADD, d, &ev));
	show("mod dir", epoll_ctl(ep, EPOLL_CTL_MOD, d, &ev));
	show("del dir", epoll_ctl(ep, EPOLL_CTL_DEL, d, NULL));
	show("del dir, bad event", epoll_ctl(ep, EPOLL_CTL_DEL, d, (void *)8));
	show("add dir, bad event", epoll_ctl(ep, EPOLL_CTL_ADD, d, (void *)8));
	show("add O_PATH dir", epoll_ctl(ep, EPOLL_CTL_ADD, p, &ev));
	show("add file", epoll_ctl(ep, EPOLL_CTL_ADD, r, &ev));
	show("add write-only file", epoll_ctl(ep, EPOLL_CTL_ADD, w, &ev));
	show("add dir, closed epfd", epoll_ctl(closed, EPOLL_CTL_ADD, d, &ev));
	show("add a closed number above 1024", epoll_ctl(ep, EPOLL_CTL_ADD, 5000, &ev));
	show("a closed number above 1024 as epfd", epoll_ctl(5000, EPOLL_CTL_ADD, d, &ev));
	show("add dir, bad op", epoll_ctl(ep, 99, d, &ev));
	show("dir as epfd, pipe", epoll_ctl(d, EPOLL_CTL_ADD, pp[0], &ev));
	show("dir as epfd, file", epoll_ctl(d, EPOLL_CTL_ADD, r, &ev));
	show("dir as epfd, itself", epoll_ctl(d, EPOLL_CTL_ADD, d, &ev));
	show("dir as epfd, closed", epoll_ctl(d, EPOLL_CTL_ADD, closed, &ev));
	show("O_PATH as epfd, pipe", epoll_ctl(p, EPOLL_CTL_ADD, pp[0], &ev));
	show("file as epfd, pipe", epoll_ctl(r, EPOLL_CTL_ADD, pp[0], &ev));
	show("add pipe", epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &ev));
	show("wait dir", epoll_wait(d, out, 1, 0));
	show("wait file", epoll_wait(r, out, 1, 0));

	REQUIRE(write(pp[1], "x", 1) == 1, "fill the pipe");
	show("splice pipe to dir", splice(pp[0], NULL, d, NULL, 1, 0));
	show("splice pipe to dir, no length", splice(pp[0], NULL, d, NULL, 0, 0));
	show("splice pipe to dir, bad flags", splice(pp[0], NULL, d, NULL, 1, 0x100));
	show("splice pipe to O_PATH", splice(pp[0], NULL, p, NULL, 1, 0));
	show("splice pipe to read-only file", splice(pp[0], NULL, r, NULL, 1, 0));
	show("splice write-only file to pipe", splice(w, NULL, pp[1], NULL, 1, 0));
	show("tee pipe to dir", tee(pp[0], d, 1, 0));
	show("tee dir to pipe", tee(d, pp[1], 1, 0));
	show("tee write-only file to pipe", tee(w, pp[1], 1, 0));
	show("tee, no length", tee(d, pp[1], 0, 0));
	show("tee, bad flags", tee(d, pp[1], 0, 0x100));
	return 0;
}
