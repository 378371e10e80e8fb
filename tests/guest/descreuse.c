/*
 * descreuse FILE: every open of FILE is a new open file description, as
 * Linux makes it, whatever an earlier description of FILE did before its
 * fd was closed, and no open releases the process's POSIX locks
 * (tests/files_test.go, TestOpenIsNewDescription). The
 * in-process tiers keep a closed plain read-only description of a
 * shadowed file for the file's next such open (trap/lend.go); each case
 * below opens and closes FILE once first, so that such a description
 * exists, then does what must keep the next open from getting it:
 *
 *   offset   a read moved the offset: the next open starts at 0;
 *   setfl    fcntl(F_SETFL, O_NONBLOCK): the next open has no O_NONBLOCK;
 *   fionbio  ioctl(FIONBIO): the same;
 *   dup      a dup outlives the close: the next open has its own offset,
 *            and the dup keeps its own;
 *   dup2     the description replaced by dup2 keeps a dup's offset;
 *   rights   the description sent with SCM_RIGHTS and received again
 *            keeps its offset when the next open reads;
 *   flock    an flock lock ends with the close: another description
 *            takes the lock;
 *   ofd      an OFD read lock ends with the close: F_OFD_GETLK of a write
 *            lock finds no conflict;
 *   mmap     a mapping that outlives its fd keeps the file's bytes, and
 *            the next open reads from 0;
 *   posix    a POSIX read lock stays through further opens of the file
 *            (plain or not: kbox's own copies of the description must not
 *            release it), and goes with the first close of one of them.
 *
 * Prints "CASE ok" per case; FAIL lines otherwise.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

static const char *path;
static char head[8];

static int openf(void)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0, "open %s", path);
	return fd;
}

/* prime opens and closes the file: an in-process tier keeps the closed
 * description for the next open. */
static void prime(void)
{
	close(openf());
}

static off_t pos(int fd) { return lseek(fd, 0, SEEK_CUR); }

/* fresh checks that fd is a new description: offset 0, reads the head. */
static int fresh(int fd)
{
	char b[4];
	int ok = pos(fd) == 0 && read(fd, b, 4) == 4 && !memcmp(b, head, 4);
	lseek(fd, 0, SEEK_SET);
	return ok;
}

/* locked reports whether a write lock of fd's description would conflict
 * with a lock on the file (the process's POSIX locks among them). */
static int locked(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

static void report(const char *name, int before)
{
	if (bad == before)
		printf("%s ok\n", name);
}

int main(int argc, char **argv)
{
	REQUIRE(argc == 2, "usage: descreuse FILE");
	path = argv[1];
	int fd = openf(), b0;
	REQUIRE(read(fd, head, sizeof head) == sizeof head, "read the head of %s", path);
	close(fd);

	b0 = bad;
	prime();
	fd = openf();
	char b[5];
	CHECK(read(fd, b, 5) == 5, "read");
	close(fd);
	fd = openf();
	CHECK(fresh(fd), "offset after a read and a close");
	close(fd);
	report("offset", b0);

	b0 = bad;
	prime();
	fd = openf();
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "F_SETFL");
	close(fd);
	fd = openf();
	CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK), "O_NONBLOCK on a new open after F_SETFL");
	close(fd);
	report("setfl", b0);

	b0 = bad;
	prime();
	fd = openf();
	int on = 1;
	CHECK(ioctl(fd, FIONBIO, &on) == 0, "FIONBIO");
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK, "FIONBIO set no O_NONBLOCK");
	close(fd);
	fd = openf();
	CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK), "O_NONBLOCK on a new open after FIONBIO");
	close(fd);
	report("fionbio", b0);

	b0 = bad;
	prime();
	fd = openf();
	CHECK(read(fd, b, 3) == 3, "read");
	int d = dup(fd);
	CHECK(d >= 0, "dup");
	close(fd);
	fd = openf();
	CHECK(fresh(fd), "a new open after a dup and a close");
	CHECK(pos(d) == 3, "the dup's offset is %lld, not 3", (long long)pos(d));
	close(fd);
	close(d);
	report("dup", b0);

	b0 = bad;
	prime();
	fd = openf();
	CHECK(read(fd, b, 3) == 3, "read");
	d = dup(fd);
	int other = openf();
	CHECK(dup2(other, fd) == fd, "dup2");
	close(other);
	close(fd);
	fd = openf();
	CHECK(fresh(fd), "a new open after dup2 replaced a description");
	CHECK(pos(d) == 3, "the dup's offset is %lld, not 3", (long long)pos(d));
	close(fd);
	close(d);
	report("dup2", b0);

	b0 = bad;
	prime();
	int sv[2];
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	fd = openf();
	CHECK(read(fd, b, 3) == 3, "read");
	char cbuf[CMSG_SPACE(sizeof(int))] = {0}, byte = 'x';
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	CHECK(sendmsg(sv[0], &mh, 0) == 1, "sendmsg");
	close(fd);
	int got = -1;
	memset(cbuf, 0, sizeof cbuf);
	mh.msg_controllen = sizeof cbuf;
	CHECK(recvmsg(sv[1], &mh, 0) == 1, "recvmsg");
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&got, CMSG_DATA(c), sizeof got);
	CHECK(got >= 0, "no fd received");
	fd = openf();
	CHECK(fresh(fd), "a new open after SCM_RIGHTS");
	CHECK(got < 0 || pos(got) == 3, "the received fd's offset is %lld, not 3", (long long)pos(got));
	close(fd);
	close(got);
	close(sv[0]);
	close(sv[1]);
	report("rights", b0);

	b0 = bad;
	prime();
	fd = openf();
	CHECK(flock(fd, LOCK_EX) == 0, "flock");
	close(fd);
	fd = openf();
	other = openf();
	CHECK(flock(other, LOCK_EX | LOCK_NB) == 0, "flock after the lock's description closed");
	close(fd);
	close(other);
	report("flock", b0);

	b0 = bad;
	prime();
	fd = openf();
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	CHECK(fcntl(fd, F_OFD_SETLK, &fl) == 0, "F_OFD_SETLK");
	close(fd);
	fd = openf();
	other = openf();
	fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET};
	CHECK(fcntl(other, F_OFD_GETLK, &fl) == 0, "F_OFD_GETLK");
	CHECK(fl.l_type == F_UNLCK, "an OFD lock outlived its description's close (type %d)", fl.l_type);
	close(fd);
	close(other);
	report("ofd", b0);

	b0 = bad;
	prime();
	fd = openf();
	char *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED, "mmap");
	CHECK(read(fd, b, 3) == 3, "read");
	close(fd);
	fd = openf();
	CHECK(fresh(fd), "a new open after a mapping's fd closed");
	CHECK(m == MAP_FAILED || !memcmp(m, head, sizeof head), "the mapping");
	close(fd);
	if (m != MAP_FAILED)
		munmap(m, 4096);
	report("mmap", b0);

	b0 = bad;
	prime();
	fd = openf();
	fl = (struct flock){.l_type = F_RDLCK, .l_whence = SEEK_SET};
	CHECK(fcntl(fd, F_SETLK, &fl) == 0, "F_SETLK");
	int q = openf(); /* asks through its own description (OFD) */
	CHECK(locked(q), "the lock after an open");
	int nb = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	CHECK(nb >= 0, "open O_NONBLOCK");
	CHECK(locked(q), "the lock after an O_NONBLOCK open");
	other = openf();
	CHECK(locked(q), "the lock after a third open");
	close(nb);
	CHECK(!locked(q), "the lock after a close of the file");
	close(other);
	close(q);
	close(fd);
	report("posix", b0);
	return bad;
}
