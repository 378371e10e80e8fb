/*
 * unseenparent: a process whose parent kbox never saw (the parent made no
 * notified call between its fork and the child's first one, as the
 * subshell of `(cmd &)`) still takes its working directory, credentials
 * and virtual fds from it. The parent waits on a pipe while its child
 * reports, then exits; the child reports its cwd, uid and whether a
 * directory fd (a virtual fd in kbox) inherited through both forks still
 * reads. Compared with the same program run natively
 * (tests/unseenparent_test.go).
 *
 * Usage: unseenparent DIR [UID]: chdir to DIR, with UID first setuid to it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
	int go[2], done[2], d;
	char buf[512], cwd[256];
	pid_t b;

	REQUIRE(argc >= 2, "usage: unseenparent DIR [UID]");
	if (argc > 2)
		REQUIRE(setresuid(atoi(argv[2]), atoi(argv[2]), atoi(argv[2])) == 0, "setresuid");
	REQUIRE(chdir(argv[1]) == 0, "chdir %s", argv[1]);
	d = open(".", O_RDONLY | O_DIRECTORY);
	REQUIRE(d >= 0 && pipe(go) == 0 && pipe(done) == 0, "setup");
	b = fork();
	REQUIRE(b >= 0, "fork");
	if (b == 0) {
		/* The unseen parent: fork, read and exit only. */
		if (fork() == 0) {
			struct stat st;
			int n;

			close(done[0]);
			n = snprintf(buf, sizeof buf, "cwd %s uid %d dirfd %s\n",
				     getcwd(cwd, sizeof cwd) ? cwd : "?", (int)getuid(),
				     fstat(d, &st) == 0 && S_ISDIR(st.st_mode) ? "ok" : "bad");
			write(1, buf, n);
			write(go[1], "x", 1);
			_exit(0); /* closes done[1]: the end the first process waits for */
		}
		close(go[1]);
		read(go[0], buf, 1); /* the child's byte, or EOF if it died */
		_exit(0);
	}
	close(done[1]);
	close(go[1]);
	waitpid(b, NULL, 0);
	read(done[0], buf, 1); /* EOF once the grandchild is gone */
	return 0;
}
