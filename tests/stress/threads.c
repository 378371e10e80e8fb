/* threads: a multi-threaded guest. threads T N: T pthreads each do N
 * rounds of stat, open/read/close of a shared file, writes of a file of
 * their own, getpid/gettid and a shared counter under a mutex; the main
 * thread checks every result. Prints "threads ok T*N". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static long rounds;
static long counter;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
	long id = (long)arg, errors = 0;
	char path[64], buf[128], want[128];
	struct stat st;
	pid_t pid = getpid();
	snprintf(path, sizeof path, "/tmp/threads.%ld", id);
	for (long i = 0; i < rounds; i++) {
		if (stat("/etc/hostname", &st) != 0 || st.st_size <= 0)
			errors++;
		int fd = open("/etc/hostname", O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof buf) <= 0)
			errors++;
		if (fd >= 0)
			close(fd);
		int n = snprintf(want, sizeof want, "thread %ld round %ld\n", id, i);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, want, n) != n || pread(fd, buf, sizeof buf, 0) != n || memcmp(buf, want, n))
			errors++;
		if (fd >= 0)
			close(fd);
		if (getpid() != pid || syscall(SYS_gettid) == pid)
			errors++;
		pthread_mutex_lock(&mu);
		counter++;
		pthread_mutex_unlock(&mu);
	}
	unlink(path);
	return (void *)errors;
}

int main(int argc, char **argv)
{
	long t = argc > 1 ? strtol(argv[1], NULL, 10) : 8;
	rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 200;
	if (t <= 0 || t > 256 || rounds <= 0) {
		fprintf(stderr, "usage: threads [T<=256] [N]\n");
		return 2;
	}
	pthread_t th[256];
	for (long i = 0; i < t; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(i + 1)) != 0) {
			printf("threads FAIL: pthread_create %ld\n", i);
			return 1;
		}
	long errors = 0;
	for (long i = 0; i < t; i++) {
		void *r;
		pthread_join(th[i], &r);
		errors += (long)r;
	}
	if (errors || counter != t * rounds) {
		printf("threads FAIL: %ld errors, counter %ld want %ld\n", errors, counter, t * rounds);
		return 1;
	}
	printf("threads ok %ld\n", counter);
	return 0;
}
