/* affinity: kbox may pin a task that opens files to the supervisor's CPU
 * (seccomp/supervisor/colocate.go); the guest must never see that. Prints
 * the CPU count sched_getaffinity reports before and after opens, in a child
 * forked after them (its real mask too, from /proc/self/status), and after
 * the guest sets its own mask. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int count(void)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	if (sched_getaffinity(0, sizeof s, &s) != 0)
		return -1;
	return CPU_COUNT(&s);
}

/* real counts the CPUs of Cpus_allowed_list (host /proc: the real mask). */
static int real(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "Cpus_allowed_list:", 18))
			continue;
		n = 0;
		for (char *p = line + 18; *p;) {
			long a = strtol(p, &p, 10), b = a;
			if (*p == '-')
				b = strtol(p + 1, &p, 10);
			n += b - a + 1;
			while (*p && (*p < '0' || *p > '9'))
				p++;
		}
	}
	fclose(f);
	return n;
}

static void opens(void)
{
	for (int i = 0; i < 20; i++) {
		int fd = open("/etc/hostname", O_RDONLY);
		if (fd >= 0)
			close(fd);
	}
}

int main(void)
{
	int before = count();
	opens();
	int after = count();
	int p[2];
	if (pipe(p) != 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		int v[2] = { count(), real() };
		write(p[1], v, sizeof v);
		_exit(0);
	}
	int v[2] = { -1, -1 };
	read(p[0], v, sizeof v);
	waitpid(pid, NULL, 0);
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	int set = sched_setaffinity(0, sizeof one, &one) == 0 ? count() : -1;
	opens();
	int setafter = count();
	printf("before=%d after=%d child=%d childreal=%d set=%d setafter=%d\n",
	       before, after, v[0], v[1], set, setafter);
	return 0;
}
