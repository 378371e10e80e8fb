/*
 * capsprctl: the bounding and ambient sets, securebits and no_new_privs
 * of the calling process, through prctl, capset, seccomp, execve and
 * /proc/self/status. The output is the same natively (run as root) and
 * under kbox: the program first narrows its sets to capabilities 0-23,
 * which every root host has, so the host's own bounding set never shows.
 *
 *   capsprctl root        as root: prctl's answers and errors, then
 *                         children that change uids, securebits, the
 *                         bounding set and no_new_privs, and exec
 *   capsprctl user        as a user (root first becomes 65534): what it
 *                         may not do, and what it may
 *   capsprctl after TAG   (exec'd by the above) what the exec left
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define CAP_VERSION_3 0x20080522
#define KEEP 0xffffffULL /* capabilities 0-23 */
#define CAP_SETPCAP 8
#define CAP_SYS_ADMIN 21
#define SECBIT_NOROOT 0x1
#define SECBIT_NO_SETUID_FIXUP 0x4
#define SECBIT_KEEP_CAPS 0x10
#define SECBIT_KEEP_CAPS_LOCKED 0x20

/* linux/filter.h and linux/seccomp.h, which musl lacks */
struct sock_filter {
	unsigned short code;
	unsigned char jt, jf;
	unsigned int k;
};
struct sock_fprog {
	unsigned short len;
	struct sock_filter *filter;
};
#define SECCOMP_MODE_FILTER 2
#define SECCOMP_SET_MODE_FILTER 1
#define BPF_RET_K 0x06
#define SECCOMP_RET_ALLOW 0x7fff0000U

struct cap_header {
	unsigned int version;
	int pid;
};
struct cap_data {
	unsigned int effective, permitted, inheritable;
};

static const char *self;

/* say prints what a call returned: its value, or its errno's name. */
static void say(const char *what, long r)
{
	if (r < 0)
		printf("%s: %s\n", what, errname(errno));
	else
		printf("%s: %ld\n", what, r);
}

static long pr(int op, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5)
{
	return prctl(op, a2, a3, a4, a5);
}

static long capset(unsigned long long eff, unsigned long long perm, unsigned long long inh)
{
	struct cap_header h = { CAP_VERSION_3, 0 };
	struct cap_data d[2] = {
		{ (unsigned)eff, (unsigned)perm, (unsigned)inh },
		{ (unsigned)(eff >> 32), (unsigned)(perm >> 32), (unsigned)(inh >> 32) },
	};
	return syscall(SYS_capset, &h, d);
}

/* status prints the capability and no_new_privs lines of /proc/self/status. */
static void status(const char *tag)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	REQUIRE(f != NULL, "open /proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Cap", 3) == 0 || strncmp(line, "NoNewPrivs:", 11) == 0)
			printf("%s %s", tag, line);
	fclose(f);
}

static void reads(void)
{
	say("get keepcaps", pr(PR_GET_KEEPCAPS, 0, 0, 0, 0));
	say("get securebits", pr(PR_GET_SECUREBITS, 0, 0, 0, 0));
	say("get no_new_privs", pr(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	say("ambient is_set 1", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 1, 0, 0));
}

/* narrow keeps capabilities 0-23 in every set (root only). */
static void narrow(void)
{
	for (int c = 0; c <= 40; c++)
		if (!(KEEP >> c & 1))
			REQUIRE(pr(PR_CAPBSET_DROP, c, 0, 0, 0) == 0, "drop %d", c);
	REQUIRE(capset(KEEP, KEEP, 0) == 0, "capset");
}

static struct sock_filter allow[] = { { BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW } };
static struct sock_fprog prog = { 1, allow };

/* again execs the program itself with "after TAG". */
static void again(const char *tag)
{
	fflush(stdout);
	execl(self, self, "after", tag, (char *)NULL);
	CHECK(0, "exec %s", self);
	exit(1);
}

/* child runs f in a child process and waits for it. */
static void child(const char *tag, void (*f)(void))
{
	fflush(stdout);
	pid_t p = fork();
	REQUIRE(p >= 0, "fork");
	if (p == 0) {
		printf("-- %s\n", tag);
		f();
		again(tag);
	}
	int st;
	REQUIRE(waitpid(p, &st, 0) == p, "wait");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %#x", tag, st);
}

/* keepcaps: SECBIT_KEEP_CAPS keeps permitted across leaving root; the
 * ambient set is cleared, raised again as a user, and is what an exec
 * leaves. */
static void keepcaps(void)
{
	say("setresuid 1000", setresuid(1000, 1000, 1000));
	status("keepcaps");
	say("capset perm, inh 1 7", capset(KEEP, KEEP, 0x82));
	say("ambient raise 1", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 1, 0, 0));
	status("raised");
}

/* nnp: without CAP_SYS_ADMIN and no_new_privs no filter; then with
 * no_new_privs, and an exec that gains nothing. */
static void nnp(void)
{
	unsigned long long less = KEEP & ~(1ULL << CAP_SYS_ADMIN | 1ULL << CAP_SETPCAP);

	say("capset without SYS_ADMIN, SETPCAP", capset(less, less, 0));
	say("PR_SET_SECUREBITS", pr(PR_SET_SECUREBITS, 0, 0, 0, 0));
	say("PR_CAPBSET_DROP 1", pr(PR_CAPBSET_DROP, 1, 0, 0, 0));
	say("PR_SET_SECCOMP bad address", pr(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, 1, 0, 0));
	say("PR_SET_SECCOMP", pr(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)&prog, 0, 0));
	say("seccomp filter", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
	say("seccomp bad flags", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 1UL << 30, &prog));
	say("set no_new_privs 0", pr(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0));
	say("set no_new_privs 1 1", pr(PR_SET_NO_NEW_PRIVS, 1, 1, 0, 0));
	say("set no_new_privs", pr(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	say("get no_new_privs", pr(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	status("nnp");
	say("PR_SET_SECCOMP with no_new_privs", pr(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)&prog, 0, 0));
	say("seccomp filter with no_new_privs", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
}

/* bounding: a capability dropped from the bounding set stays out after an
 * exec; one dropped from permitted comes back. */
static void bounding(void)
{
	say("PR_CAPBSET_DROP 41", pr(PR_CAPBSET_DROP, 41, 0, 0, 0));
	say("PR_CAPBSET_DROP 2", pr(PR_CAPBSET_DROP, 2, 0, 0, 0));
	say("PR_CAPBSET_READ 2", pr(PR_CAPBSET_READ, 2, 0, 0, 0));
	say("capset without 3", capset(KEEP & ~8ULL, KEEP & ~8ULL, 0x82));
	say("capset inheritable 2 (not bounding)", capset(KEEP & ~8ULL, KEEP & ~8ULL, 0x86));
	status("bounding");
}

/* noroot: SECBIT_NOROOT makes root's exec keep the ambient set alone; a
 * locked bit cannot change. */
static void noroot(void)
{
	say("set NOROOT|KEEP_CAPS_LOCKED", pr(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_KEEP_CAPS_LOCKED, 0, 0, 0));
	say("set keepcaps 1 (locked)", pr(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	say("unlock", pr(PR_SET_SECUREBITS, SECBIT_NOROOT, 0, 0, 0));
	say("get securebits", pr(PR_GET_SECUREBITS, 0, 0, 0, 0));
}

/* nofixup: SECBIT_NO_SETUID_FIXUP keeps every capability across leaving
 * root. */
static void nofixup(void)
{
	say("set NO_SETUID_FIXUP", pr(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0));
	say("setresuid 1000", setresuid(1000, 1000, 1000));
	status("nofixup");
}

static void root(void)
{
	narrow();
	status("start");
	reads();
	say("PR_CAPBSET_READ 0", pr(PR_CAPBSET_READ, 0, 0, 0, 0));
	say("PR_CAPBSET_READ 30", pr(PR_CAPBSET_READ, 30, 0, 0, 0));
	say("PR_CAPBSET_READ 41", pr(PR_CAPBSET_READ, 41, 0, 0, 0));
	say("get no_new_privs 1", pr(PR_GET_NO_NEW_PRIVS, 1, 0, 0, 0));
	say("ambient raise 1 (not inheritable)", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 1, 0, 0));
	say("capset inh 1 7", capset(KEEP, KEEP, 0x82));
	say("capset inh 30 (not bounding)", capset(KEEP, KEEP, 0x82 | 1ULL << 30));
	say("ambient raise 1", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 1, 0, 0));
	say("ambient is_set 1", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 1, 0, 0));
	say("ambient is_set 2", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 2, 0, 0));
	say("ambient clear_all 1", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 1, 0, 0));
	say("ambient is_set 41", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 41, 0, 0));
	say("ambient op 9", pr(PR_CAP_AMBIENT, 9, 1, 0, 0));
	say("set securebits 1<<12", pr(PR_SET_SECUREBITS, 1 << 12, 0, 0, 0));
	say("set keepcaps 2", pr(PR_SET_KEEPCAPS, 2, 0, 0, 0));
	say("set keepcaps 1", pr(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	reads();
	status("root");
	child("keepcaps", keepcaps);
	child("nnp", nnp);
	child("bounding", bounding);
	child("noroot", noroot);
	child("nofixup", nofixup);
	say("capset inh 1 7 dropped", capset(KEEP, KEEP, 0));
	status("trimmed");
}

static void user(void)
{
	if (getuid() == 0) {
		narrow();
		REQUIRE(setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0, "become 65534");
	}
	status("user");
	reads();
	say("PR_CAPBSET_READ 0", pr(PR_CAPBSET_READ, 0, 0, 0, 0));
	say("PR_CAPBSET_DROP 1", pr(PR_CAPBSET_DROP, 1, 0, 0, 0));
	say("PR_SET_SECUREBITS 0", pr(PR_SET_SECUREBITS, 0, 0, 0, 0));
	say("set keepcaps 1", pr(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	say("ambient raise 1", pr(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 1, 0, 0));
	say("PR_SET_SECCOMP", pr(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)&prog, 0, 0));
	say("set no_new_privs", pr(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	say("PR_SET_SECCOMP with no_new_privs", pr(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)&prog, 0, 0));
	char name[16] = "";
	say("PR_SET_NAME", pr(PR_SET_NAME, (unsigned long)"capsname", 0, 0, 0));
	say("PR_GET_NAME", pr(PR_GET_NAME, (unsigned long)name, 0, 0, 0));
	printf("name %s\n", name);
	status("user");
	again("user");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	self = argv[0];
	if (argc >= 2 && strcmp(argv[1], "root") == 0)
		root();
	else if (argc >= 2 && strcmp(argv[1], "user") == 0)
		user();
	else if (argc >= 3 && strcmp(argv[1], "after") == 0) {
		printf("-- after %s: uid %d euid %d\n", argv[2], (int)getuid(), (int)geteuid());
		reads();
		status(argv[2]);
	} else {
		fprintf(stderr, "usage: capsprctl root|user|after TAG\n");
		return 2;
	}
	return bad;
}
