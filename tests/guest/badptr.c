/* badptr: hostile pointers and lengths in syscalls kbox serves. Each line
 * names a case and the errno the syscall gave ("ok" for none); the test runs
 * the program natively and under kbox and compares the two outputs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "check.h"

static void report(const char *name, long r)
{
	if (r >= 0)
		printf("%-28s ok\n", name);
	else
		printf("%-28s %s\n", name, errname(errno));
}

#define TRY(name, call) do { errno = 0; report(name, (long)(call)); } while (0)

int main(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	/* Pages: read-write, PROT_NONE, read-write, PROT_NONE, read-only. */
	char *m = mmap(NULL, 5 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	char *none = m + pg, *none2 = m + 3 * pg, *ro = m + 4 * pg;
	memcpy(none, "/etc/hostname", 14);
	/* A path whose NUL is the last byte before a PROT_NONE page, and one
	 * whose bytes run into one unterminated. */
	char *fits = none - 14, *runs = none2 - 4;
	memcpy(fits, "/etc/hostname", 14);
	memcpy(runs, "/etc", 4);
	mprotect(none, pg, PROT_NONE);
	mprotect(none2, pg, PROT_NONE);
	mprotect(ro, pg, PROT_READ);
	static struct stat st;
	char *kernel = (char *)0xffff800000000000UL;
	char longp[6000];
	memset(longp, 'a', sizeof longp - 1);
	longp[sizeof longp - 1] = 0;

	TRY("stat null path", syscall(SYS_newfstatat, AT_FDCWD, NULL, &st, 0));
	TRY("stat path at 1", syscall(SYS_newfstatat, AT_FDCWD, (char *)1, &st, 0));
	TRY("stat kernel path", syscall(SYS_newfstatat, AT_FDCWD, kernel, &st, 0));
	TRY("stat prot_none path", syscall(SYS_newfstatat, AT_FDCWD, none, &st, 0));
	TRY("stat path ends at guard", syscall(SYS_newfstatat, AT_FDCWD, fits, &st, 0));
	TRY("stat path runs into guard", syscall(SYS_newfstatat, AT_FDCWD, runs, &st, 0));
	TRY("stat null buf", syscall(SYS_newfstatat, AT_FDCWD, "/etc/hostname", NULL, 0));
	TRY("stat read-only buf", syscall(SYS_newfstatat, AT_FDCWD, "/etc/hostname", ro, 0));
	TRY("stat buf into guard", syscall(SYS_newfstatat, AT_FDCWD, "/etc/hostname", none - 8, 0));
	TRY("stat kernel buf", syscall(SYS_newfstatat, AT_FDCWD, "/etc/hostname", kernel, 0));
	TRY("stat too long", syscall(SYS_newfstatat, AT_FDCWD, longp, &st, 0));
	TRY("statx read-only buf", syscall(SYS_statx, AT_FDCWD, "/etc/hostname", 0, 0x7ff, ro));
	TRY("open null", syscall(SYS_openat, AT_FDCWD, NULL, O_RDONLY));
	TRY("open prot_none path", syscall(SYS_openat, AT_FDCWD, none, O_RDONLY));
	TRY("open too long", syscall(SYS_openat, AT_FDCWD, longp, O_RDONLY));
	TRY("openat2 bad how", syscall(SYS_openat2, AT_FDCWD, "/etc/hostname", none, 24));
	TRY("openat2 short how", syscall(SYS_openat2, AT_FDCWD, "/etc/hostname", &st, 8));
	TRY("access kernel path", syscall(SYS_faccessat, AT_FDCWD, kernel, R_OK));
	TRY("mkdir null", syscall(SYS_mkdirat, AT_FDCWD, NULL, 0755));
	TRY("rename bad new", syscall(SYS_renameat, AT_FDCWD, "/nonexistent-x", AT_FDCWD, none));
	TRY("readlink bad buf", syscall(SYS_readlinkat, AT_FDCWD, "/bin/sh", none, 64));
	TRY("getcwd bad buf", syscall(SYS_getcwd, none, 4096));
	TRY("getcwd read-only buf", syscall(SYS_getcwd, ro, 4096));
	TRY("uname bad buf", syscall(SYS_uname, ro));
	TRY("chdir kernel", syscall(SYS_chdir, kernel));
	char *argv[] = { "x", NULL };
	TRY("execve null path", syscall(SYS_execve, NULL, argv, NULL));
	TRY("execve bad argv", syscall(SYS_execve, "/bin/true", none, NULL));
	int d = open("/etc", O_RDONLY | O_DIRECTORY);
	TRY("getdents bad buf", syscall(SYS_getdents64, d, none, 4096));
	TRY("getdents read-only buf", syscall(SYS_getdents64, d, ro, 4096));
	/* The entries a fault could not deliver are still there. */
	static char dents[4096];
	long got = syscall(SYS_getdents64, d, dents, sizeof dents);
	TRY("getdents after faults", got > 0 ? 0 : (errno = got ? errno : ENOENT, -1));
	/* A regular file: under kbox with KBOX_SHADOW_MAX=1 a virtual fd
	 * served by LKL, not a shadow. */
	int f = open("/etc/hostname", O_RDONLY);
	char small[16];
	struct iovec bad_base = { none, 8 }, good = { small, 8 };
	TRY("read bad buf", syscall(SYS_read, f, none, 8));
	TRY("read read-only buf", syscall(SYS_read, f, ro, 8));
	TRY("pread null buf", syscall(SYS_pread64, f, NULL, 8, 0));
	TRY("pread negative offset", syscall(SYS_pread64, f, small, 8, -1L));
	TRY("readv bad iov", syscall(SYS_readv, f, none, 1));
	TRY("readv bad base", syscall(SYS_readv, f, &bad_base, 1));
	TRY("readv too many", syscall(SYS_readv, f, &good, 1025));
	TRY("readv negative count", syscall(SYS_readv, f, &good, -1));
	TRY("lseek negative", syscall(SYS_lseek, f, -1L, SEEK_SET));
	TRY("lseek bad whence", syscall(SYS_lseek, f, 0, 42));
	TRY("fstat read-only buf", syscall(SYS_fstat, f, ro));
	TRY("fstatfs read-only buf", syscall(SYS_fstatfs, f, ro));
	TRY("statfs read-only buf", syscall(SYS_statfs, "/", ro));
	TRY("getrandom read-only buf", syscall(SYS_getrandom, ro, 16, 0));
	TRY("getcwd size 0", syscall(SYS_getcwd, small, 0));
	TRY("getcwd size 1", syscall(SYS_getcwd, small, 1));
	TRY("readlink size 0", syscall(SYS_readlinkat, AT_FDCWD, "/bin/sh", small, 0));
	TRY("getdents count 0", syscall(SYS_getdents64, open("/", O_RDONLY | O_DIRECTORY), dents, 0));
	TRY("openat2 huge how", syscall(SYS_openat2, AT_FDCWD, "/etc/hostname", m, 1 << 20));
	TRY("openat2 unknown flags", syscall(SYS_openat2, AT_FDCWD, "/etc/hostname", &(struct { unsigned long long f, m, r; }){ 1ULL << 40, 0, 0 }, 24));
	char *envp_bad = none;
	TRY("execve bad envp", syscall(SYS_execve, "/bin/true", argv, envp_bad));
	TRY("fchdir bad fd", syscall(SYS_fchdir, 999));
	TRY("close_range inverted", syscall(SYS_close_range, 10, 5, 0));
	return 0;
}
