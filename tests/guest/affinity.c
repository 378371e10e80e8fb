/* affinity: kbox may pin a task that opens files to the supervisor's CPU
 * (seccomp/supervisor/colocate.go); the guest must never see that. Prints
 * the CPU count sched_getaffinity reports before and after opens, in a child
 * forked after them (its real mask too, from /proc/self/status), and after
 * the guest sets its own mask; and its real mask once it has made no
 * notification for a while (the pin must be gone). Then the heirs: fork
 * and clone are not notified, so a child and a thread made by a pinned
 * task inherit the pin's mask; a child and a thread that make no system
 * call at all must still have the task's own mask once the pin has gone
 * (heirs=, threadheir=: their real masks, read by the parent). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

/* cpus counts the CPUs of a Cpus_allowed_list line. */
static int cpus(const char *list)
{
	int n = 0;
	for (char *p = (char *)list; *p;) {
		long a = strtol(p, &p, 10), b = a;
		if (*p == '-')
			b = strtol(p + 1, &p, 10);
		n += b - a + 1;
		while (*p && (*p < '0' || *p > '9'))
			p++;
	}
	return n;
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
		if (!strncmp(line, "Cpus_allowed_list:", 18))
			n = cpus(line + 18);
	}
	fclose(f);
	return n;
}

/* realLater is the real mask of this process, read by a child from
 * /proc/PID/status: the child's open is the only notification, and it is
 * the child's (it could pin the child, never this task). A status file
 * opened earlier would not do: kbox makes the first process's status text
 * at open (it hides the parent), so a pread of it shows the mask then. */
static int realLater(void)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", (int)getpid());
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		char line[256];
		int n = -1;
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f)) {
			if (!strncmp(line, "Cpus_allowed_list:", 18))
				n = cpus(line + 18);
		}
		write(p[1], &n, sizeof n);
		_exit(0);
	}
	int n = -1;
	read(p[0], &n, sizeof n);
	waitpid(pid, NULL, 0);
	close(p[0]);
	close(p[1]);
	return n;
}

static volatile int stop;
static volatile pid_t spinner;

/* spin runs without a single system call until told to stop. */
static void *spin(void *arg)
{
	(void)arg;
	while (!stop)
		;
	return NULL;
}

static void *spinThread(void *arg)
{
	spinner = (pid_t)syscall(SYS_gettid);
	return spin(arg);
}

/* maskOf counts the CPUs of task tid's real mask. */
static int maskOf(pid_t tid)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	if (sched_getaffinity(tid, sizeof s, &s) != 0)
		return -1;
	return CPU_COUNT(&s);
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
	opens();
	/* kbox lets a pin go after 20 ms without a notification. */
	usleep(200 * 1000);
	int released = realLater();
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
	/* Back to the whole mask (the guest's own setting), then pinned by
	 * opens, then a child and a thread that never make a system call. */
	cpu_set_t all;
	CPU_ZERO(&all);
	for (int i = 0; i < CPU_SETSIZE && i < before; i++)
		CPU_SET(i, &all);
	sched_setaffinity(0, sizeof all, &all);
	opens();
	pid_t heir = fork();
	if (heir == 0) {
		spin(NULL);
		_exit(0);
	}
	pthread_t t;
	pthread_create(&t, NULL, spinThread, NULL);
	usleep(200 * 1000); /* the pin lets go after 20 ms */
	while (!spinner)
		;
	int heirs = maskOf(heir), threadheir = maskOf(spinner);
	stop = 1;
	pthread_join(t, NULL);
	kill(heir, SIGKILL);
	waitpid(heir, NULL, 0);
	printf("before=%d after=%d child=%d childreal=%d set=%d setafter=%d released=%d heirs=%d threadheir=%d\n",
	       before, after, v[0], v[1], set, setafter, released, heirs, threadheir);
	return 0;
}
