/*
 * Calls that act on another process, checked by the caller's credentials
 * as Linux checks them, one line per check ("name result"). Run as root;
 * every mode prints what a native run prints too.
 *
 * "procperm vm": a child copies to and from its parent's memory with
 * process_vm_readv and process_vm_writev (the data crosses, bad
 * addresses are EFAULT, flags EINVAL), then as uid 65534 is refused
 * (EPERM).
 * "procperm sched": a child with euid 65534 may not change its parent's
 * affinity, scheduling parameters or policy, nor its nice value (EPERM),
 * but may change its own.
 * "procperm user": getpriority and setpriority by user (PRIO_USER) of
 * users without a process are ESRCH; the caller's own user is found.
 * Natively it only reads the priorities of root's processes.
 * "procperm host PID" (under kbox only: it renices the caller's user)
 * names PID, a host process outside the guest, which is no task of the
 * guest (ESRCH), and sets the nice value of the guest's processes of the
 * caller's user, read back by user.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static char shared[64] = "before fork";
static char target[64] = "untouched";

static long vm(int write, pid_t pid, void *local, void *remote, size_t len, unsigned long flags)
{
	struct iovec l = {local, len}, r = {remote, len};
	return syscall(write ? SYS_process_vm_writev : SYS_process_vm_readv, pid, &l, 1UL, &r, 1UL, flags);
}

static void vmchild(pid_t parent, int ready)
{
	char c, buf[64] = {0};
	if (read(ready, &c, 1) != 1)
		exit(3);
	long n = vm(0, parent, buf, shared, sizeof shared, 0);
	printf("readv parent %s %ld %s\n", outcome(n), n, buf);
	char msg[64] = "written by the child";
	n = vm(1, parent, msg, target, sizeof target, 0);
	printf("writev parent %s %ld\n", outcome(n), n);
	printf("readv flags %s\n", outcome(vm(0, parent, buf, shared, sizeof shared, 1)));
	printf("readv bad remote %s\n", outcome(vm(0, parent, buf, (void *)-1, 16, 0)));
	printf("readv bad local %s\n", outcome(vm(0, parent, (void *)-1, shared, 16, 0)));
	void *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("writev unmapped local %s\n", outcome(vm(1, parent, none, target, 16, 0)));
	printf("readv self %s\n", outcome(vm(0, getpid(), buf, shared, 16, 0)));
	if (setuid(65534) != 0)
		exit(4);
	printf("readv parent as nobody %s\n", outcome(vm(0, parent, buf, shared, 16, 0)));
	printf("writev parent as nobody %s\n", outcome(vm(1, parent, msg, target, 16, 0)));
	printf("readv self as nobody %s\n", outcome(vm(0, getpid(), buf, shared, 16, 0)));
	exit(0);
}

static void vms(void)
{
	int p[2];
	if (pipe(p) != 0)
		exit(2);
	pid_t parent = getpid(), c = fork();
	if (c == 0) {
		close(p[1]);
		vmchild(parent, p[0]);
	}
	strcpy(shared, "after fork");
	if (write(p[1], "x", 1) != 1)
		exit(2);
	int st;
	waitpid(c, &st, 0);
	printf("child status %d\n", st);
	printf("parent target %s\n", target);
}

static void schedchild(pid_t parent)
{
	if (seteuid(65534) != 0)
		exit(4);
	cpu_set_t cs;
	sched_getaffinity(0, sizeof cs, &cs);
	struct sched_param sp = {0};
	printf("setaffinity parent %s\n", outcome(sched_setaffinity(parent, sizeof cs, &cs)));
	printf("setparam parent %s\n", outcome(syscall(SYS_sched_setparam, parent, &sp)));
	printf("setscheduler parent %s\n", outcome(syscall(SYS_sched_setscheduler, parent, SCHED_OTHER, &sp)));
	printf("setparam parent bad prio %s\n", outcome(syscall(SYS_sched_setparam, parent, &(struct sched_param){5})));
	printf("setparam parent bad addr %s\n", outcome(syscall(SYS_sched_setparam, parent, (void *)8)));
	printf("setpriority parent %s\n", outcome(setpriority(PRIO_PROCESS, parent, 0)));
	printf("setaffinity self %s\n", outcome(sched_setaffinity(0, sizeof cs, &cs)));
	printf("setparam self %s\n", outcome(syscall(SYS_sched_setparam, 0, &sp)));
	printf("setscheduler self %s\n", outcome(syscall(SYS_sched_setscheduler, getpid(), SCHED_BATCH, &sp)));
	exit(0);
}

static void scheds(void)
{
	pid_t parent = getpid(), c = fork();
	if (c == 0)
		schedchild(parent);
	int st;
	waitpid(c, &st, 0);
	printf("child status %d\n", st);
}

static long getprio(int which, int who)
{
	errno = 0;
	int r = getpriority(which, who);
	return r == -1 && errno ? -1 : 0;
}

static void users(void)
{
	printf("getpriority user self %s\n", outcome(getprio(PRIO_USER, 0)));
	printf("getpriority user -1 %s\n", outcome(getprio(PRIO_USER, -1)));
	printf("getpriority user none %s\n", outcome(getprio(PRIO_USER, 54321)));
	printf("setpriority user -1 %s\n", outcome(setpriority(PRIO_USER, -1, 0)));
	printf("setpriority user none %s\n", outcome(setpriority(PRIO_USER, 54321, 0)));
}

static void hosts(pid_t host)
{
	char buf[16];
	printf("readv host %s\n", outcome(vm(0, host, buf, shared, sizeof buf, 0)));
	printf("writev host %s\n", outcome(vm(1, host, buf, target, sizeof buf, 0)));
	printf("setpriority user self %s\n", outcome(setpriority(PRIO_USER, 0, 7)));
	errno = 0;
	int p = getpriority(PRIO_USER, 0);
	printf("getpriority user self %d %s\n", p, outcome(p == -1 && errno ? -1 : 0));
	errno = 0;
	p = getpriority(PRIO_PROCESS, 0);
	printf("getpriority self %d\n", p);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "vm"))
		vms();
	else if (argc >= 2 && !strcmp(argv[1], "sched"))
		scheds();
	else if (argc >= 2 && !strcmp(argv[1], "user"))
		users();
	else if (argc >= 3 && !strcmp(argv[1], "host"))
		hosts(atoi(argv[2]));
	else
		return 2;
	return 0;
}
