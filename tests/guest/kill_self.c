/* kill_self: die from SIGTERM with the default disposition, so the parent
 * observes WIFSIGNALED with WTERMSIG == 15. */
#include <signal.h>
#include <stdio.h>

int main(void)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t set;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_UNBLOCK, &set, NULL);

	raise(SIGTERM);
	fprintf(stderr, "kill_self: still alive after raise(SIGTERM)\n");
	return 1;
}
