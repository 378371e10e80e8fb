/*
 * check.h: the assertions of kbox's guest test programs.
 *
 * CHECK(cond, fmt, ...) prints "FAIL file.c:line: message (strerror of
 * errno)" on stdout when cond is false and sets bad, which the program
 * returns; REQUIRE is CHECK that ends the program with status 1. The
 * tests look for "FAIL" in a program's output and for its exit status.
 * errname(e) names an errno value for the programs' output, outcome(r)
 * the result of a call that returned r.
 */
#ifndef KBOX_CHECK_H
#define KBOX_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad __attribute__((unused));

static __attribute__((unused)) void check_failed(const char *file, int line)
{
	const char *base = strrchr(file, '/');
	printf("FAIL %s:%d: ", base ? base + 1 : file, line);
}

#define CHECK(cond, ...)                                             \
	do {                                                         \
		if (!(cond)) {                                       \
			int check_errno_ = errno;                    \
			check_failed(__FILE__, __LINE__);               \
			printf(__VA_ARGS__);                         \
			printf(" (%s)\n", strerror(check_errno_));   \
			fflush(stdout);                              \
			bad = 1;                                     \
		}                                                    \
	} while (0)

#define REQUIRE(cond, ...)                      \
	do {                                    \
		if (!(cond)) {                  \
			CHECK(0, __VA_ARGS__);  \
			exit(1);                \
		}                               \
	} while (0)

/*
 * errname is the name of errno value e ("EPERM", "ENOENT", ...) for the
 * errnos the programs meet, "0" for 0 and "errno<N>" for the others.
 * The tests compare these names with what they want, so a new errno a
 * program prints is added here.
 */
static __attribute__((unused)) const char *errname(int e)
{
	static char b[32];

	switch (e) {
	case 0: return "0";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case ENOEXEC: return "ENOEXEC";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case EXDEV: return "EXDEV";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case EMFILE: return "EMFILE";
	case ENOTTY: return "ENOTTY";
	case EFBIG: return "EFBIG";
	case ENOSPC: return "ENOSPC";
	case ESPIPE: return "ESPIPE";
	case EROFS: return "EROFS";
	case ERANGE: return "ERANGE";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ENOLCK: return "ENOLCK";
	case ENOSYS: return "ENOSYS";
	case ENOTEMPTY: return "ENOTEMPTY";
	case ELOOP: return "ELOOP";
	case ENOMSG: return "ENOMSG";
	case EIDRM: return "EIDRM";
	case ENODATA: return "ENODATA";
	case EOVERFLOW: return "EOVERFLOW";
	case ENOTSOCK: return "ENOTSOCK";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	}
	snprintf(b, sizeof b, "errno%d", e);
	return b;
}

/* outcome is "ok" for a call that returned r >= 0, else errno's name. */
static __attribute__((unused)) const char *outcome(long r)
{
	return r >= 0 ? "ok" : errname(errno);
}

#endif
