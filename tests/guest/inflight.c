/* inflight: a shadow's only description in flight in a unix socket.
 *
 *   inflight FILE DIR N
 *
 * writes "before\n" to FILE, sends its fd through a socketpair to itself
 * and closes it, so that the description exists only in the socket's
 * queue; then makes N files in DIR (enough to fill kbox's node cache,
 * whose trim drops the nodes no guest holds), receives the fd and writes
 * "after\n" through it. Prints "sent", "made N", "wrote". kbox must not
 * take the in-flight description for no holder: the second write would
 * go to a content file kbox had dropped, and never reach the image. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int n = atoi(argv[3]);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "before\n", 7) != 7) {
		perror("inflight: file");
		return 1;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0) {
		perror("inflight: socketpair");
		return 1;
	}
	char byte = 'x', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	if (sendmsg(sv[0], &m, 0) != 1) {
		perror("inflight: sendmsg");
		return 1;
	}
	close(fd);
	printf("sent\n");
	if (mkdir(argv[2], 0755) < 0) {
		perror("inflight: mkdir");
		return 1;
	}
	char p[4096];
	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof p, "%s/f%d", argv[2], i);
		int f = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (f < 0 || write(f, "y", 1) != 1) {
			perror("inflight: a file");
			return 1;
		}
		close(f);
	}
	printf("made %d\n", n);
	memset(cbuf, 0, sizeof cbuf);
	m.msg_controllen = sizeof cbuf;
	if (recvmsg(sv[1], &m, 0) != 1 || !(h = CMSG_FIRSTHDR(&m)) || h->cmsg_type != SCM_RIGHTS) {
		perror("inflight: recvmsg");
		return 1;
	}
	memcpy(&fd, CMSG_DATA(h), sizeof(int));
	if (pwrite(fd, "after\n", 6, 7) != 6) {
		perror("inflight: pwrite");
		return 1;
	}
	close(fd);
	printf("wrote\n");
	return 0;
}
