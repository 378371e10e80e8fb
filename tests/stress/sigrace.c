/* sigrace: a signal raised by the thread itself must be delivered before
 * raise() returns. Repeats N times (argv[1], default 200). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t counter;

static void on_usr1(int sig)
{
	(void)sig;
	counter++;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200;
	if (n <= 0) {
		fprintf(stderr, "usage: sigrace [N>0]\n");
		return 2;
	}
	for (long i = 0; i < n; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGUSR1, &sa, NULL) != 0) {
			printf("sigrace FAIL at %ld\n", i);
			return 1;
		}
		sig_atomic_t before = counter;
		raise(SIGUSR1);
		if (counter != before + 1) {
			printf("sigrace FAIL at %ld\n", i);
			return 1;
		}
	}
	printf("sigrace ok %ld\n", n);
	return 0;
}
