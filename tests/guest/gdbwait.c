/*
 * gdbwait: a guest for the GDB and Delve helpers' tests
 * (tests/gdb_test.go) and docs/gdb-workflow.md. It opens a known image
 * file with open(2) (a shadow: a host fd) and a directory with openat(2)
 * (a virtual fd), says which fds it got, and waits so that a debugger can
 * attach to kbox.
 *
 *   gdbwait [SECONDS [DIR]]    (default 60 and /etc)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 60;
	const char *dirname = argc > 2 ? argv[2] : "/etc";
	int file = open("/etc/passwd", O_RDONLY);
	int dir = openat(AT_FDCWD, dirname, O_RDONLY | O_DIRECTORY);

	if (file < 0 || dir < 0) {
		perror("gdbwait: open");
		return 1;
	}
	printf("gdbwait: pid %d file fd %d dir fd %d\n", getpid(), file, dir);
	fflush(stdout);
	for (int i = 0; i < secs; i++)
		sleep(1);
	return 0;
}
