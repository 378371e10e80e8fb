/* observe: a known workload for the observatory tests.
 *
 *   observe DIRS NOSYS MILLIS
 *
 * holds DIRS directory fds open (virtual fds in kbox), makes NOSYS calls of
 * a syscall kbox answers as absent (landlock_create_ruleset: ENOSYS, as a
 * kernel without Landlock), then stats a file of the
 * image until MILLIS milliseconds have passed, touching a fresh anonymous
 * page every 100 stats (a page fault the host accounts). It prints
 * "observe: N stats, landlock_create_ruleset errno E". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: observe DIRS NOSYS MILLIS\n");
		return 2;
	}
	int dirs = atoi(argv[1]), nosys = atoi(argv[2]);
	long long end = now_ms() + atoll(argv[3]);
	int err = 0;

	for (int i = 0; i < dirs; i++) {
		if (open("/etc", O_RDONLY | O_DIRECTORY) < 0) {
			perror("observe: open /etc");
			return 1;
		}
	}
	for (int i = 0; i < nosys; i++) {
		if (syscall(SYS_landlock_create_ruleset, 0, 0, 0) < 0)
			err = errno;
	}
	long n = 0;
	struct stat st;
	do {
		char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (page != MAP_FAILED) {
			page[0] = 1;
			munmap(page, 4096);
		}
		for (int i = 0; i < 100; i++, n++) {
			if (stat("/etc/hostname", &st) != 0) {
				perror("observe: stat");
				return 1;
			}
		}
	} while (now_ms() < end);
	printf("observe: %ld stats, landlock_create_ruleset errno %d\n", n, err);
	return 0;
}
