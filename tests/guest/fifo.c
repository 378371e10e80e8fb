/* fifo: a FIFO of the image between guest processes behaves as on Linux.
 * "fifo PATH" makes PATH a FIFO and checks open without blocking
 * (O_NONBLOCK reader at once, O_NONBLOCK writer ENXIO without a reader,
 * O_RDWR), the flags asked for (O_CLOEXEC, O_NONBLOCK), blocking opens in
 * both orders, several readers waiting at once, EOF, EPIPE and SIGPIPE, a
 * reader killed while its open waits, opens that must not wait (exec,
 * O_DIRECTORY, O_PATH), and a handled signal during a waiting open. Prints
 * "fifo ok" when all hold. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* status of child pid: its exit code, or 100+signal */
static int reap(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

/* A child that opens p for reading (blocking), writes a byte to fd tell
 * (if >= 0) once open, reads everything and exits 0 if it read want. */
static pid_t reader_told(const char *p, const char *want, int tell)
{
	pid_t pid = fork();
	if (pid == 0) {
		char buf[64] = {0};
		int fd = open(p, O_RDONLY);
		if (fd < 0)
			_exit(2);
		if (fcntl(fd, F_GETFD) & FD_CLOEXEC)
			_exit(5);
		if (tell >= 0)
			write(tell, "o", 1);
		int n = 0, r;
		while ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
			n += r;
		_exit(r == 0 && strcmp(buf, want) == 0 ? 0 : 3);
	}
	return pid;
}

static pid_t reader(const char *p, const char *want) { return reader_told(p, want, -1); }

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

int main(int argc, char **argv)
{
	const char *p = argc > 1 ? argv[1] : "/tmp/fifo.test";
	char buf[16];
	struct stat st;

	unlink(p);
	CHECK(mkfifo(p, 0644) == 0, "mkfifo");
	CHECK(stat(p, &st) == 0 && S_ISFIFO(st.st_mode), "stat: not a FIFO");

	/* Opens that never block. */
	int r = open(p, O_RDONLY | O_NONBLOCK);
	CHECK(r >= 0, "O_NONBLOCK reader open");
	CHECK(r < 1024, "reader fd %d is not a host fd", r);
	CHECK(fstat(r, &st) == 0 && S_ISFIFO(st.st_mode), "fstat: not a FIFO");
	CHECK(fcntl(r, F_GETFL) & O_NONBLOCK, "F_GETFL lacks O_NONBLOCK");
	CHECK((fcntl(r, F_GETFD) & FD_CLOEXEC) == 0, "reader is close-on-exec");
	CHECK(read(r, buf, 1) == 0, "read without a writer is not EOF");
	int w = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	CHECK(w >= 0, "O_NONBLOCK writer open with a reader");
	CHECK(fcntl(w, F_GETFD) & FD_CLOEXEC, "O_CLOEXEC not set");
	errno = 0;
	CHECK(read(r, buf, 1) == -1 && errno == EAGAIN, "empty read with a writer did not fail with EAGAIN");
	CHECK(write(w, "x", 1) == 1 && read(r, buf, 1) == 1 && buf[0] == 'x', "round trip");
	close(w);
	CHECK(read(r, buf, 1) == 0, "no EOF after the writer closed");
	close(r);
	errno = 0;
	CHECK(open(p, O_WRONLY | O_NONBLOCK) == -1 && errno == ENXIO, "O_NONBLOCK writer without a reader did not fail with ENXIO");
	int rw = open(p, O_RDWR);
	CHECK(rw >= 0, "O_RDWR open");
	CHECK((fcntl(rw, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) == O_RDWR, "O_RDWR F_GETFL %#x", fcntl(rw, F_GETFL));
	CHECK(write(rw, "y", 1) == 1 && read(rw, buf, 1) == 1 && buf[0] == 'y', "O_RDWR round trip");
	close(rw);

	/* Blocking opens: reader first, then writer first. */
	pid_t c = reader(p, "hello");
	nap(100);
	w = open(p, O_WRONLY);
	CHECK(w >= 0, "writer open after a reader");
	CHECK((fcntl(w, F_GETFL) & O_NONBLOCK) == 0, "blocking writer is non-blocking");
	CHECK(write(w, "hello", 5) == 5, "write");
	close(w);
	CHECK(reap(c) == 0, "reader (opened first) did not read hello then EOF");

	c = fork();
	if (c == 0) {
		nap(100);
		int fd = open(p, O_RDONLY);
		_exit(fd >= 0 && read(fd, buf, 5) == 5 && memcmp(buf, "later", 5) == 0 ? 0 : 3);
	}
	w = open(p, O_WRONLY | O_CLOEXEC);
	CHECK(w >= 0, "writer open before a reader");
	CHECK(fcntl(w, F_GETFD) & FD_CLOEXEC, "O_CLOEXEC not set on a writer that waited");
	CHECK(write(w, "later", 5) == 5, "write");
	close(w);
	CHECK(reap(c) == 0, "reader (opened second) did not read");

	/* Two readers wait at once: one writer releases both (it stays open
	 * until both have opened). */
	int told[2];
	CHECK(pipe(told) == 0, "pipe");
	pid_t c1 = reader_told(p, "", told[1]), c2 = reader_told(p, "", told[1]);
	nap(100);
	w = open(p, O_WRONLY);
	CHECK(w >= 0, "writer open with two readers waiting");
	CHECK(read(told[0], buf, 1) == 1 && read(told[0], buf, 1) == 1, "readers' opens");
	close(w);
	close(told[0]);
	close(told[1]);
	CHECK(reap(c1) == 0 && reap(c2) == 0, "two waiting readers were not both released");

	/* EPIPE with SIGPIPE ignored, death by SIGPIPE otherwise. */
	r = open(p, O_RDONLY | O_NONBLOCK);
	w = open(p, O_WRONLY | O_NONBLOCK);
	CHECK(r >= 0 && w >= 0, "open pair");
	close(r);
	signal(SIGPIPE, SIG_IGN);
	errno = 0;
	CHECK(write(w, "z", 1) == -1 && errno == EPIPE, "write without a reader did not fail with EPIPE");
	signal(SIGPIPE, SIG_DFL);
	c = fork();
	if (c == 0) {
		write(w, "z", 1);
		_exit(0);
	}
	CHECK(reap(c) == 100 + SIGPIPE, "writer without a reader not killed by SIGPIPE");
	close(w);

	/* A reader killed while its open waits leaves no reader behind, and
	 * the next reader waits for a real writer. */
	c = fork();
	if (c == 0) {
		open(p, O_RDONLY);
		_exit(4);
	}
	nap(100);
	kill(c, SIGKILL);
	CHECK(reap(c) == 100 + SIGKILL, "waiting reader not killed");
	int gone = 0;
	for (int i = 0; i < 500 && !gone; i++) {
		w = open(p, O_WRONLY | O_NONBLOCK);
		if (w < 0 && errno == ENXIO)
			gone = 1;
		else {
			if (w >= 0)
				close(w);
			nap(10);
		}
	}
	CHECK(gone, "a killed reader's open still counts as a reader");
	c = reader(p, "after");
	nap(100);
	w = open(p, O_WRONLY);
	CHECK(w >= 0 && write(w, "after", 5) == 5, "writer after a killed reader");
	close(w);
	CHECK(reap(c) == 0, "reader after a killed reader did not read");

	/* Opens that must fail rather than wait. */
	char *args[] = {(char *)p, NULL};
	errno = 0;
	execv(p, args);
	CHECK(errno == EACCES, "exec of a FIFO");
	errno = 0;
	CHECK(open(p, O_RDONLY | O_DIRECTORY) == -1 && errno == ENOTDIR, "O_DIRECTORY open of a FIFO");
	int o = open(p, O_PATH);
	CHECK(o >= 0, "O_PATH open");
	close(o);

	CHECK(unlink(p) == 0, "unlink");

	/* A handled signal interrupts a waiting open: EINTR without
	 * SA_RESTART; with it, the handler runs and the open goes on
	 * waiting. A FIFO of its own, and a child that opens it for
	 * writing after a while, so that a regression fails instead of
	 * waiting forever. */
	char q[256];
	snprintf(q, sizeof q, "%s.sig", p);
	unlink(q);
	CHECK(mkfifo(q, 0600) == 0, "mkfifo");
	pid_t rescue = fork();
	if (rescue == 0) {
		nap(1000);
		int fd = open(q, O_WRONLY);
		nap(200);
		_exit(fd >= 0 ? 0 : 1);
	}
	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 0}, {0, 200000}};
	setitimer(ITIMER_REAL, &it, NULL);
	errno = 0;
	int e = open(q, O_RDONLY);
	CHECK(e == -1 && errno == EINTR && alarms == 1, "open not interrupted by a handled signal (fd %d, %d alarms)", e, alarms);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	e = open(q, O_RDONLY);
	CHECK(e >= 0 && alarms == 2, "open with SA_RESTART: fd %d, %d alarms", e, alarms);
	close(e);
	CHECK(reap(rescue) == 0, "writer");
	unlink(q);
	if (!bad)
		printf("fifo ok\n");
	return bad;
}
