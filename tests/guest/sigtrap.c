/* sigtrap: one thread makes a served syscall in a loop (umask), another
 * keeps sending it a signal with a handler. Each call must return the
 * previous mask: a trapped syscall lost to a signal returns its own number
 * (95) instead. Usage: sigtrap N. Prints "sigtrap ok N SIGNALS". */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int done;
static volatile long handled;
static volatile pid_t target;

static void on_usr1(int sig) { (void)sig; handled++; }

static void *sender(void *arg)
{
	(void)arg;
	while (!target)
		;
	while (!done)
		syscall(SYS_tgkill, getpid(), target, SIGUSR1);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t t;
	pthread_create(&t, NULL, sender, NULL);
	target = (pid_t)syscall(SYS_gettid);
	long r = syscall(SYS_umask, 022);
	for (long i = 0; i < n; i++) {
		r = syscall(SYS_umask, 022);
		if (r != 022) {
			done = 1;
			printf("sigtrap FAIL: call %ld of umask returned %ld (signals handled: %ld)\n", i, r, handled);
			return 1;
		}
	}
	done = 1;
	pthread_join(t, NULL);
	printf("sigtrap ok %ld %s\n", n, handled > 0 ? "signals" : "no-signals");
	return 0;
}
