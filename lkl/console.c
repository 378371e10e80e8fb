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
 */
#include <string.h>
#include <unistd.h>
#include <lkl_host.h>
#include "lkl_glue.h"

#define KLOG 32768

static char klog[KLOG];
static unsigned long klog_total;	/* bytes ever written */
static int klog_echo;
static void (*orig_panic)(void);

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
