/* execerr PATH: execve(PATH) directly (no execvp fallback to sh) and
 * report why it failed: "execerr errno N NAME", status 126 (or 127 for
 * ENOENT), as a shell would. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: execerr PATH\n");
		return 2;
	}
	char *args[] = {argv[1], NULL};
	char *env[] = {NULL};
	execve(argv[1], args, env);
	int e = errno;
	printf("execerr errno %d %s\n", e, strerror(e));
	return e == ENOENT ? 127 : 126;
}
