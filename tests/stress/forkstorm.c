/* forkstorm: fork N children (argv[1], default 50). Each child execs
 * /opt/tests/hello with stdout on /dev/null when that exists, otherwise it
 * just calls _exit(7). All exit statuses are checked. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define HELLO "/opt/tests/hello"

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 50;
	int use_exec = access(HELLO, X_OK) == 0;
	int want = use_exec ? 0 : 7;
	long bad = 0;

	if (n <= 0) {
		fprintf(stderr, "usage: forkstorm [N>0]\n");
		return 2;
	}
	fflush(stdout);
	pid_t *pids = calloc(n, sizeof(pid_t));
	if (!pids)
		return 1;
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			printf("forkstorm FAIL: fork %ld\n", i);
			return 1;
		}
		if (pid == 0) {
			if (use_exec) {
				int fd = open("/dev/null", O_WRONLY);
				if (fd >= 0) {
					dup2(fd, 1);
					if (fd != 1)
						close(fd);
				} else {
					close(1); /* no /dev/null: drop output */
				}
				char *args[] = { HELLO, NULL };
				execv(HELLO, args);
				_exit(127);
			}
			_exit(7);
		}
		pids[i] = pid;
	}
	for (long i = 0; i < n; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) != pids[i]) {
			printf("forkstorm FAIL: waitpid child %ld\n", i);
			return 1;
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != want)
			bad++;
	}
	if (bad) {
		printf("forkstorm FAIL: %ld of %ld children had a wrong status\n", bad, n);
		return 1;
	}
	printf("forkstorm ok %ld\n", n);
	return 0;
}
