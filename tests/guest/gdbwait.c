/*
 * gdbwait: a guest for the GDB and Delve helpers' tests
 * (tests/gdb_test.go): it opens a known image file (a shadow: a host fd)
 * and a known directory (a virtual fd), says which fds it got, and waits
 * so that a debugger can attach to kbox. It exits after the number of
 * seconds in argv[1] (default 60).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 60;
	int file = open("/etc/passwd", O_RDONLY);
	int dir = open("/etc", O_RDONLY | O_DIRECTORY);

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
