/*
 * slowexit MB: a guest whose death takes a while: it touches MB MiB of
 * memory (its exit then has that much to free), starts a child that
 * sleeps, prints its pid and the child's, and waits. TestNoOrphans kills
 * kbox under it: the keeper must still kill the child, which reparents
 * to it only once this process has finished dying.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
	char *p = malloc(mb << 20);
	if (p == NULL) {
		perror("malloc");
		return 1;
	}
	memset(p, 1, mb << 20);
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		for (;;)
			pause();
	}
	printf("%d %d\n", (int)getpid(), (int)child);
	fflush(stdout);
	for (;;)
		pause();
}
