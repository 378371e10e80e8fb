//go:build lkl

/*
 * The kernel's console. kbox boots LKL with loglevel 7 and takes its
 * console output (lkl_host_ops.print) into a ring of the last KLOG bytes;
 * it writes it to stderr only when asked (--verbose, or a loglevel on the
 * kernel command line). When the kernel panics (lkl_host_ops.panic, after
 * panic() printed why), the ring goes to stderr first: without it, a
 * panic said only "lib/posix-host.c:303: panic: Assertion `0' failed".
 * The kernel serialises console output, so the ring has one writer at a
 * time.
 *
 * A panic while kbox is starting (kbox_lkl_starting: from boot until the
 * guest may run, so no guest has done anything yet) starts kbox once more
 * with the same arguments, by exec, after the ring: LKL 6.0 has a rare
 * race between its timer thread and the thread that holds its CPU
 * ("BUG: failure at kernel/irq_work.c:235/irq_work_run_list()" right
 * after the root is mounted: once in about 30 CI runs of thousands of
 * boots each), which a second start does not meet. Once only (KBOX_LKL_RESTARTED in
 * the second start's environment): a panic that comes again is the
 * image's or the kernel's and ends kbox as before.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <lkl_host.h>
#include "lkl_glue.h"

#define KLOG 32768

static char klog[KLOG];
static unsigned long klog_total;	/* bytes ever written */
static int klog_echo;
static void (*orig_panic)(void);
static _Atomic int starting;
static int restarted; /* this kbox is the second start (kbox_lkl_restarted) */

extern char **environ;

#define RESTARTED "KBOX_LKL_RESTARTED=1"

static void out(const char *s, size_t n);

void kbox_lkl_starting(int on)
{
	atomic_store(&starting, on);
}

void kbox_lkl_restarted(void)
{
	restarted = 1;
}

void kbox_lkl_panic(void)
{
	lkl_host_ops.panic();
}

/* restart execs kbox again with its own arguments, read from
 * /proc/self/cmdline, and its environment plus RESTARTED (which kbox takes
 * out of its environment at start, lkl.go); it returns if this kbox is the
 * second start already, or the exec failed. No allocation: other threads
 * may hold the allocator's locks. */
static void restart(void)
{
	static char cmd[65536];
	static char *argv[4096];
	static char *envp[8192];
	int n = 0, argc = 0, envc = 0;
	if (restarted)
		return;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		ssize_t r = read(fd, cmd + n, sizeof(cmd) - 1 - (size_t)n);
		if (r <= 0)
			break;
		n += (int)r;
	}
	close(fd);
	if (n == 0 || n >= (int)sizeof(cmd) - 1)
		return;
	cmd[n] = 0;
	for (int i = 0; i < n; i += (int)strlen(cmd + i) + 1) {
		if (argc == 4095)
			return; /* more arguments than kept: not the same command */
		argv[argc++] = cmd + i;
	}
	argv[argc] = NULL;
	for (char **e = environ; e != NULL && *e != NULL; e++) {
		if (envc == 8190)
			return;
		envp[envc++] = *e;
	}
	envp[envc++] = (char *)RESTARTED;
	envp[envc] = NULL;
	static const char msg[] = "kbox: the kernel panicked while kbox was starting, before the guest ran: starting once more\n";
	out(msg, sizeof(msg) - 1);
	execve("/proc/self/exe", argv, envp);
}

static void out(const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(2, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void klog_print(const char *str, int len)
{
	if (len <= 0)
		return;
	if (klog_echo)
		out(str, (size_t)len);
	for (int i = 0; i < len; i++)
		klog[(klog_total + (unsigned long)i) % KLOG] = str[i];
	klog_total += (unsigned long)len;
}

static void klog_panic(void)
{
	static const char head[] = "kbox: the kernel (LKL) panicked; its last console messages:\n";
	out(head, sizeof(head) - 1);
	if (!klog_echo) {
		unsigned long n = klog_total < KLOG ? klog_total : KLOG;
		unsigned long start = (klog_total - n) % KLOG;
		size_t first = KLOG - start < n ? KLOG - start : n;
		out(klog + start, first);
		out(klog, n - first);
	}
	if (atomic_load(&starting))
		restart();
	if (orig_panic != NULL)
		orig_panic();
}

void kbox_lkl_console(int echo)
{
	klog_echo = echo;
	if (lkl_host_ops.print == klog_print)
		return;
	lkl_host_ops.print = klog_print;
	orig_panic = lkl_host_ops.panic;
	lkl_host_ops.panic = klog_panic;
}
