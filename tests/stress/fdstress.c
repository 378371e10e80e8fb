/* fdstress: exhaust the fd table, check for EMFILE, then check that the
 * process recovers after closing everything. Try with `ulimit -n 64`. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATH "/etc/hostname"
#define MAX_FDS (1 << 20)

int main(void)
{
	int *fds = malloc(sizeof(int) * MAX_FDS);
	int count = 0, err = 0;

	if (!fds)
		return 1;
	for (;;) {
		if (count == MAX_FDS) {
			printf("fdstress FAIL: no error after %d opens\n", count);
			return 1;
		}
		int fd = open(PATH, O_RDONLY);
		if (fd < 0) {
			err = errno;
			break;
		}
		fds[count++] = fd;
	}
	if (err != EMFILE) {
		printf("fdstress FAIL: open failed after %d with %s (want EMFILE)\n",
		       count, strerror(err));
		return 1;
	}
	printf("emfile %d\n", count);
	for (int i = 0; i < count; i++)
		close(fds[i]);
	int fd = open(PATH, O_RDONLY);
	if (fd < 0) {
		printf("fdstress FAIL: reopen after close: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	puts("recovered");
	free(fds);
	return 0;
}
