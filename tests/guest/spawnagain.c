/* spawnagain: posix_spawn (a CLONE_VM|CLONE_VFORK child: the child shares
 * the parent's memory until it execs) of the same program, named by the
 * same string literal, N times (argv[1], default 3), then 8 at once, then
 * system(3) twice, then 20 spawns named by a heap string that the parent
 * uses for something else as soon as posix_spawn returns (as Python's
 * subprocess frees the path's bytes and reuses the memory): what the
 * parent writes there must stay (kbox put the path back into it while the
 * parent ran, and corrupted Python's heap).
 * Every spawn must run and exit 0. Prints "spawnagain ok N". */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 3;
	for (long i = 0; i < n; i++) {
		pid_t pid;
		char *args[] = {"hello", NULL};
		int err = posix_spawn(&pid, "/opt/tests/hello", NULL, NULL, args, environ);
		int st = 0;
		if (err != 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("spawnagain FAIL: spawn %ld: err %d status %#x\n", i, err, st);
			return 1;
		}
	}
	/* a burst: the next spawn starts before the last child has run */
	pid_t burst[8];
	for (int i = 0; i < 8; i++) {
		char *args[] = {"hello", NULL};
		if (posix_spawn(&burst[i], "/opt/tests/hello", NULL, NULL, args, environ) != 0) {
			printf("spawnagain FAIL: burst spawn %d\n", i);
			return 1;
		}
	}
	for (int i = 0; i < 8; i++) {
		int st = 0;
		if (waitpid(burst[i], &st, 0) != burst[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("spawnagain FAIL: burst child %d status %#x\n", i, st);
			return 1;
		}
	}
	for (int i = 0; i < 2; i++) {
		int st = system("exit 3");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 3) {
			printf("spawnagain FAIL: system %d: status %#x\n", i, st);
			return 1;
		}
	}
	for (int i = 0; i < 20; i++) {
		char *path = malloc(64);
		strcpy(path, "/opt/tests/hello");
		char *args[] = {"hello", NULL};
		pid_t pid;
		if (posix_spawn(&pid, path, NULL, NULL, args, environ) != 0) {
			printf("spawnagain FAIL: heap spawn %d\n", i);
			return 1;
		}
		memset(path, 'z', 63); /* the memory's next use */
		path[63] = 0;
		int st = 0;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("spawnagain FAIL: heap child %d status %#x\n", i, st);
			return 1;
		}
		for (int k = 0; k < 63; k++)
			if (path[k] != 'z') {
				printf("spawnagain FAIL: heap spawn %d: the parent's memory was written after it resumed: %.20s\n", i, path);
				return 1;
			}
		free(path);
	}
	printf("spawnagain ok %ld\n", n);
	return 0;
}
