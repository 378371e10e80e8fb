/* forkintr: fork, vfork and thread creation must never fail with EINTR
 * (Linux restarts them when a signal arrives), even while a signal handler
 * installed without SA_RESTART runs thousands of times a second, as a
 * shell's SIGCHLD handler does. Prints how many of each failed, and how;
 * "forkintr N 0 0 0" is the only right answer. Also: clone3 either works
 * or is absent (ENOSYS), so libc can fall back to clone. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;

static void onalarm(int sig)
{
	(void)sig;
	alarms++;
}

static void *thread(void *arg) { return arg; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = onalarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 50 }, { 0, 50 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int forkfail = 0, vforkfail = 0, threadfail = 0, other = 0;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(7);
		if (pid < 0) {
			forkfail++;
			if (errno != EINTR)
				other++;
		} else {
			int st;
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
		}
		pid = vfork();
		if (pid == 0)
			_exit(7);
		if (pid < 0) {
			vforkfail++;
			if (errno != EINTR)
				other++;
		} else {
			int st;
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
		}
		pthread_t t;
		int err = pthread_create(&t, NULL, thread, NULL);
		if (err) {
			threadfail++;
		} else {
			pthread_join(t, NULL);
		}
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	/* clone3 with an invalid size: EINVAL where it exists, ENOSYS where
	 * it is absent; never anything else. */
	long r = syscall(435 /* clone3 */, NULL, 0);
	printf("forkintr %d %d %d %d other=%d clone3=%s alarms=%s\n", n, forkfail, vforkfail, threadfail, other,
	       r == -1 && (errno == ENOSYS || errno == EINVAL) ? "ok" : strerror(errno), alarms > 0 ? "yes" : "no");
	return 0;
}
