/*
 * check.h: the assertions of kbox's guest test programs.
 *
 * CHECK(cond, fmt, ...) prints "FAIL file.c:line: message (strerror of
 * errno)" on stdout when cond is false and sets bad, which the program
 * returns; REQUIRE is CHECK that ends the program with status 1. The
 * tests look for "FAIL" in a program's output and for its exit status.
 */
#ifndef KBOX_CHECK_H
#define KBOX_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad;

static void check_failed(const char *file, int line)
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

#endif
