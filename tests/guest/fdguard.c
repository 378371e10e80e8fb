/* fdguard: calls with an fd argument, given fd numbers that are not the
 * guest's open fds: one the guest closed, and every number from its
 * RLIMIT_NOFILE up (in the in-process tiers the guest shares kbox's fd
 * table and kbox's own fds sit there; natively none is open). Each must
 * fail with EBADF, as on Linux, whichever argument the fd is in
 * (tests/trap_test.go, TestTrapFDGuardEveryCall).
 *
 * It prints one line per call, "NAME: EBADF" or the first fd that got
 * another answer, and ends by reading /etc/hostname (kbox intact). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* kbox's fds are the first numbers at and above the guest's limit. */
#define SPAN 256

static int pr, pw, mfd, ep, sock;

static long c_inotify_add_watch(int fd) { return inotify_add_watch(fd, "/", IN_ACCESS); }
static long c_inotify_rm_watch(int fd) { return inotify_rm_watch(fd, 1); }
static long c_sendfile_out(int fd) { return sendfile(fd, mfd, NULL, 1); }
static long c_sendfile_in(int fd) { return sendfile(pw, fd, NULL, 1); }
static long c_copy_file_range_in(int fd) { return copy_file_range(fd, NULL, mfd, NULL, 1, 0); }
static long c_copy_file_range_out(int fd) { return copy_file_range(mfd, NULL, fd, NULL, 1, 0); }
static long c_splice_in(int fd) { return splice(fd, NULL, pw, NULL, 1, SPLICE_F_NONBLOCK); }
static long c_splice_out(int fd) { return splice(pr, NULL, fd, NULL, 1, SPLICE_F_NONBLOCK); }
static long c_tee_in(int fd) { return tee(fd, pw, 1, SPLICE_F_NONBLOCK); }
static long c_tee_out(int fd) { return tee(pr, fd, 1, SPLICE_F_NONBLOCK); }

static long c_vmsplice(int fd)
{
	char b = 'x';
	struct iovec iov = {&b, 1};
	return vmsplice(fd, &iov, 1, SPLICE_F_NONBLOCK);
}

static long c_sendmmsg(int fd)
{
	char b = 'x';
	struct iovec iov = {&b, 1};
	struct mmsghdr m = {.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}};
	return sendmmsg(fd, &m, 1, MSG_DONTWAIT);
}

static long c_recvmmsg(int fd)
{
	char b;
	struct iovec iov = {&b, 1};
	struct mmsghdr m = {.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}};
	return recvmmsg(fd, &m, 1, MSG_DONTWAIT, NULL);
}

static long c_epoll_pwait2(int fd)
{
	struct epoll_event ev;
	struct timespec ts = {0, 0};
	return syscall(SYS_epoll_pwait2, fd, &ev, 1, &ts, NULL, 8);
}

static long c_epoll_ctl_epfd(int fd)
{
	struct epoll_event ev = {.events = EPOLLIN};
	return epoll_ctl(fd, EPOLL_CTL_DEL, pr, &ev); /* never adds to kbox's */
}

static long c_epoll_ctl_fd(int fd)
{
	struct epoll_event ev = {.events = EPOLLIN};
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static long c_pidfd_send_signal(int fd) { return syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0); }

static long c_timerfd_gettime(int fd)
{
	struct itimerspec its;
	return syscall(SYS_timerfd_gettime, fd, &its);
}

static long c_linkat_new(int fd) { return linkat(AT_FDCWD, "/etc/hostname", fd, "fdguard-link", 0); }
static long c_renameat_new(int fd) { return renameat(AT_FDCWD, "/etc/hostname", fd, "fdguard-new"); }

static long c_renameat2_new(int fd)
{
	return syscall(SYS_renameat2, AT_FDCWD, "/etc/hostname", fd, "fdguard-new", 0);
}

static long c_cachestat(int fd)
{
	unsigned long long range[2] = {0, 0}, cs[5];
	return syscall(451 /* cachestat */, fd, range, cs, 0);
}

static long c_readahead(int fd) { return readahead(fd, 0, 1); }
static long c_fadvise(int fd) { return syscall(SYS_fadvise64, fd, 0, 1, POSIX_FADV_NORMAL); }
static long c_fstat(int fd)
{
	struct stat st;
	return fstat(fd, &st);
}

static const struct {
	const char *name;
	long (*fn)(int);
} calls[] = {
	{"inotify_add_watch", c_inotify_add_watch},
	{"inotify_rm_watch", c_inotify_rm_watch},
	{"sendfile out_fd", c_sendfile_out},
	{"sendfile in_fd", c_sendfile_in},
	{"copy_file_range fd_in", c_copy_file_range_in},
	{"copy_file_range fd_out", c_copy_file_range_out},
	{"splice fd_in", c_splice_in},
	{"splice fd_out", c_splice_out},
	{"tee fd_in", c_tee_in},
	{"tee fd_out", c_tee_out},
	{"vmsplice", c_vmsplice},
	{"sendmmsg", c_sendmmsg},
	{"recvmmsg", c_recvmmsg},
	{"epoll_pwait2", c_epoll_pwait2},
	{"epoll_ctl epfd", c_epoll_ctl_epfd},
	{"epoll_ctl fd", c_epoll_ctl_fd},
	{"pidfd_send_signal", c_pidfd_send_signal},
	{"timerfd_gettime", c_timerfd_gettime},
	{"linkat newdirfd", c_linkat_new},
	{"renameat newdirfd", c_renameat_new},
	{"renameat2 newdirfd", c_renameat2_new},
	{"cachestat", c_cachestat},
	{"readahead", c_readahead},
	{"fadvise64", c_fadvise},
	{"fstat", c_fstat},
};

int main(void)
{
	struct rlimit rl;
	int p[2];
	REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	int g = (int)rl.rlim_cur;
	REQUIRE(pipe2(p, O_NONBLOCK) == 0, "pipe2");
	pr = p[0], pw = p[1];
	REQUIRE((mfd = memfd_create("fdguard", 0)) >= 0, "memfd_create");
	REQUIRE(write(mfd, "abc", 3) == 3 && lseek(mfd, 0, SEEK_SET) == 0, "memfd write");
	REQUIRE((ep = epoll_create1(0)) >= 0, "epoll_create1");
	REQUIRE((sock = socket(AF_UNIX, SOCK_DGRAM, 0)) >= 0, "socket");
	int closed = dup(0);
	REQUIRE(closed >= 0 && close(closed) == 0, "dup, close");

	int probes[SPAN + 1], n = 0;
	probes[n++] = closed;
	for (int fd = g; fd < g + SPAN; fd++)
		probes[n++] = fd;
	for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
		int first = -1, got = 0;
		for (int j = 0; j < n; j++) {
			errno = 0;
			long r = calls[i].fn(probes[j]);
			int e = r < 0 ? errno : 0;
			if (e != EBADF && first < 0)
				first = probes[j], got = e;
		}
		if (first < 0) {
			printf("%s: EBADF\n", calls[i].name);
			continue;
		}
		printf("%s: fd %s %s\n", calls[i].name, first == closed ? "closed" : "above the limit", (got ? errname(got) : "ok"));
		errno = got;
		CHECK(0, "%s of fd %d: want EBADF, got %s", calls[i].name, first, (got ? errname(got) : "ok"));
	}

	/* The guest's own fds still work in every position. */
	int q[2], mfd2 = memfd_create("fdguard2", 0);
	REQUIRE(pipe2(q, O_NONBLOCK) == 0 && mfd2 >= 0, "pipe2, memfd_create");
	loff_t off = 0;
	struct epoll_event ev = {.events = EPOLLIN};
	CHECK(sendfile(pw, mfd, &off, 1) == 1, "sendfile memfd to pipe");
	off = 1;
	CHECK(splice(mfd, &off, pw, NULL, 1, 0) == 1, "splice memfd to pipe");
	CHECK(tee(pr, q[1], 2, 0) == 2, "tee pipe to pipe");
	CHECK(splice(q[0], NULL, mfd2, NULL, 2, 0) == 2, "splice pipe to memfd");
	off = 2;
	CHECK(copy_file_range(mfd, &off, mfd2, NULL, 1, 0) == 1, "copy_file_range memfd to memfd");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pr, &ev) == 0, "epoll_ctl add a pipe");
	CHECK(epoll_wait(ep, &ev, 1, 0) == 1, "epoll_wait of a pipe with data");
	char three[4] = {0};
	CHECK(pread(mfd2, three, 3, 0) == 3 && strcmp(three, "abc") == 0, "memfd holds %s", three);
	printf("own fds: sendfile, splice, tee, copy_file_range, epoll_ctl work\n");

	char buf[128];
	int fd = open("/etc/hostname", O_RDONLY);
	ssize_t k = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	CHECK(k > 0, "/etc/hostname after the calls");
	printf("fdguard: %zu calls, /etc/hostname %s\n", sizeof calls / sizeof calls[0], k > 0 ? "read" : "unreadable");
	return bad;
}
