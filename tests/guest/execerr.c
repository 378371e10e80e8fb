/* execerr PATH: execve(PATH) directly (no execvp fallback to sh) and
 * report why it failed: "execerr errno N NAME", status 126 (or 127 for
 * ENOENT), as a shell would. execerr -at PATH: the same with
 * execveat(-1, PATH, ..., 0), whose directory fd an absolute PATH ignores. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int at = argc == 3 && strcmp(argv[1], "-at") == 0;
	if (argc != 2 && !at) {
		fprintf(stderr, "usage: execerr [-at] PATH\n");
		return 2;
	}
	char *path = argv[argc - 1];
	char *args[] = {path, NULL};
	char *env[] = {NULL};
	if (at)
		syscall(SYS_execveat, -1, path, args, env, 0);
	else
		execve(path, args, env);
	int e = errno;
	printf("execerr errno %d %s\n", e, strerror(e));
	return e == ENOENT ? 127 : 126;
}
