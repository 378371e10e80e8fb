/* fdflags: F_SETFL/F_GETFL on virtual fds (served by LKL): O_NONBLOCK is
 * kept on the LKL file, shared by dups, and a read-only open is not left
 * non-blocking by kbox; O_APPEND (set by F_SETFL or at open) on a file too
 * large for a shadow makes writes append. A FIFO of the image is a host
 * fd, whose O_NONBLOCK makes an empty read fail with EAGAIN. Prints
 * "fdflags ok" when all hold.
 * "fdflags mkbig PATH" makes PATH a sparse file of 65 MiB (truncate(2) of
 * the path, in LKL: no shadow copy) for shell tests of big files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static long long size_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "mkbig") == 0) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || close(fd) != 0 || truncate(argv[2], 65LL << 20) != 0) {
			perror("mkbig");
			return 1;
		}
		return 0;
	}
	const char *fifo = "/root/fdflags.fifo", *big = "/root/fdflags.big";
	const long long bigsz = 65LL << 20; /* above the 64 MiB shadow limit */
	char c;

	unlink(fifo);
	CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
	int f = open(fifo, O_RDWR);
	CHECK(f >= 0 && f < 1024, "fifo fd %d is not a host fd", f);
	CHECK((fcntl(f, F_GETFL) & O_NONBLOCK) == 0, "fifo starts non-blocking");
	CHECK((fcntl(f, F_GETFL) & O_ACCMODE) == O_RDWR, "fifo access mode");
	CHECK(fcntl(f, F_SETFL, O_NONBLOCK) == 0, "F_SETFL O_NONBLOCK");
	CHECK(fcntl(f, F_GETFL) & O_NONBLOCK, "F_GETFL lacks O_NONBLOCK");
	errno = 0;
	CHECK(read(f, &c, 1) == -1 && errno == EAGAIN, "empty non-blocking read did not fail with EAGAIN");
	int d = dup(f);
	CHECK(fcntl(d, F_GETFL) & O_NONBLOCK, "dup does not share O_NONBLOCK");
	CHECK(fcntl(f, F_SETFL, 0) == 0 && (fcntl(d, F_GETFL) & O_NONBLOCK) == 0, "clearing O_NONBLOCK");
	CHECK(write(f, "z", 1) == 1 && read(d, &c, 1) == 1 && c == 'z', "fifo round trip");
	close(d);
	close(f);
	unlink(fifo);

	unlink(big);
	int w = open(big, O_WRONLY | O_CREAT, 0600);
	CHECK(w >= 0, "create big");
	close(w);
	CHECK(truncate(big, bigsz) == 0, "truncate big");
	w = open(big, O_WRONLY);
	CHECK(w >= 1024, "big fd %d is not virtual", w);
	CHECK((fcntl(w, F_GETFL) & (O_APPEND | O_ACCMODE)) == O_WRONLY, "F_GETFL %#x, want O_WRONLY", fcntl(w, F_GETFL));
	CHECK(write(w, "head", 4) == 4 && size_of(w) == bigsz, "write at 0 changed the size");
	CHECK(fcntl(w, F_SETFL, O_APPEND) == 0, "F_SETFL O_APPEND");
	CHECK((fcntl(w, F_GETFL) & (O_APPEND | O_ACCMODE)) == (O_APPEND | O_WRONLY), "F_GETFL lacks O_APPEND");
	CHECK(lseek(w, 0, SEEK_SET) == 0 && write(w, "tail", 4) == 4, "append write");
	CHECK(size_of(w) == bigsz + 4, "size %lld after append, want %lld", size_of(w), bigsz + 4);
	close(w);
	w = open(big, O_RDONLY);
	CHECK(w >= 1024, "big fd %d is not virtual", w);
	CHECK((fcntl(w, F_GETFL) & (O_NONBLOCK | O_ACCMODE)) == O_RDONLY, "read-only open: F_GETFL %#x", fcntl(w, F_GETFL));
	CHECK(fcntl(w, F_SETFL, O_NONBLOCK) == 0 && (fcntl(w, F_GETFL) & O_NONBLOCK), "F_SETFL O_NONBLOCK on a virtual fd");
	d = dup(w);
	CHECK(d >= 1024 && (fcntl(d, F_GETFL) & O_NONBLOCK), "dup does not share O_NONBLOCK");
	CHECK(fcntl(w, F_SETFL, 0) == 0 && (fcntl(d, F_GETFL) & O_NONBLOCK) == 0, "clearing O_NONBLOCK on a virtual fd");
	CHECK(read(d, &c, 1) == 1 && c == 'h', "read of the big file");
	close(d);
	close(w);
	w = open(big, O_RDONLY | O_NONBLOCK);
	CHECK(w >= 1024 && (fcntl(w, F_GETFL) & O_NONBLOCK), "O_NONBLOCK at open not reported");
	close(w);
	w = open(big, O_WRONLY | O_APPEND);
	CHECK(w >= 1024 && (fcntl(w, F_GETFL) & O_APPEND), "open O_APPEND not reported");
	CHECK(write(w, "more", 4) == 4 && size_of(w) == bigsz + 8, "O_APPEND at open: size %lld", size_of(w));
	close(w);
	unlink(big);
	if (!bad)
		printf("fdflags ok\n");
	return bad;
}
