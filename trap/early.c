//go:build linux && amd64 && cgo

/* What the in-process tiers set up before the Go runtime starts its
 * threads: two kernel calls that wait for an RCU grace period when the
 * process has more than one thread, and return at once while it has one.
 * Each cost 6 to 16 ms of an in-process run's start-up on a 2-vCPU VM.
 *
 * - The fd table. The trap tier keeps fds 0 to 1023 for its guest and
 *   its own fds above them (fds.go), so the table grows past the 64 slots
 *   a process starts with (expand_fdtable). Every kbox process but the
 *   guest's start-up (whose table the guest would inherit) and the socket
 *   binder grows it here: 2,048 slots, 16 KiB of kernel memory. The soft
 *   limit on open files is left as it was.
 * - The rewrite tier's registration for membarrier's core serialisation
 *   (rewrite.go, initRewrite), done here when the command line asks for
 *   the rewrite tier or for a trusted run (auto then picks it for a
 *   static program). initRewrite registers again, at no cost once done. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"

static void grow_fdtable(void)
{
	struct rlimit rl, raised;
	rlim_t top = KBOX_FD_TABLE - 1;
	int any, fd;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_max != RLIM_INFINITY && top >= rl.rlim_max)
		top = rl.rlim_max - 1;
	if (top < 64)
		return;
	raised = rl;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= top) {
		raised.rlim_cur = top + 1;
		if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
			return;
	}
	any = open("/", O_PATH | O_CLOEXEC);
	if (any >= 0) {
		/* the lowest free fd at top or above: an fd open there
		 * (passed down by kbox's parent) is left alone */
		fd = fcntl(any, F_DUPFD_CLOEXEC, (int)top);
		if (fd >= 0)
			close(fd);
		close(any);
	}
	if (raised.rlim_cur != rl.rlim_cur)
		setrlimit(RLIMIT_NOFILE, &rl);
}

/* wants_rewrite: kbox's options (before "--") ask for the rewrite tier,
 * or for a trusted run. */
static int wants_rewrite(int argc, char **argv)
{
	for (int i = 1; i < argc && argv[i] != NULL; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			return 0;
		if (strcmp(a, "--trusted") == 0 || strcmp(a, "--syscall-mode=rewrite") == 0)
			return 1;
		if (strcmp(a, "--syscall-mode") == 0 && i + 1 < argc && argv[i + 1] != NULL &&
		    strcmp(argv[i + 1], "rewrite") == 0)
			return 1;
	}
	return 0;
}

__attribute__((constructor(102))) static void kbox_early(int argc, char **argv)
{
	if (getenv("KBOX_GUEST_INIT") != NULL || getenv("KBOX_BINDER_ONLY") != NULL)
		return;
	grow_fdtable();
	if (wants_rewrite(argc, argv))
		syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
}
