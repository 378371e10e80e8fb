/*
 * resolvememo DIR: the same path string asked again resolves afresh when
 * what it depends on changed (tests/files_test.go, TestResolveMemo). kbox
 * keeps each serving thread's last resolution of a path to the image
 * (dispatch/resolve.go, resolveMemo); this asks one relative name, "f",
 * from the same buffer in two directories where it is a file and a
 * directory, after chdir and fchdir, in a child process whose cwd differs
 * from its parent's (where fork runs), and one absolute path before and
 * after another thread's chroot (as root). Prints FAIL lines, and "ok"
 * when all agree.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char name[] = "f";

/* jail chroots the process into b, from a (another thread). */
static void *jail(void *arg)
{
	if (chroot("../b") < 0)
		printf("FAIL chroot ../b (%s)\n", strerror(errno));
	return arg;
}

static int kind(void)
{
	struct stat st;
	if (stat(name, &st) < 0)
		return -errno;
	return st.st_mode & S_IFMT;
}

int main(int argc, char **argv)
{
	REQUIRE(argc == 2, "usage: resolvememo DIR");
	mkdir(argv[1], 0755);
	REQUIRE(chdir(argv[1]) == 0, "chdir %s", argv[1]);
	mkdir("a", 0755);
	mkdir("b", 0755);
	int fd = open("a/f", O_CREAT | O_WRONLY, 0644);
	REQUIRE(fd >= 0, "create a/f");
	close(fd);
	mkdir("b/f", 0755);
	int b = open("b", O_RDONLY | O_DIRECTORY);
	REQUIRE(b >= 0, "open b");

	for (int round = 0; round < 2; round++) {
		REQUIRE(chdir("a") == 0, "chdir a");
		CHECK(kind() == S_IFREG, "a/f after chdir a: %d", kind());
		REQUIRE(fchdir(b) == 0, "fchdir b");
		CHECK(kind() == S_IFDIR, "b/f after fchdir b: %d", kind());
		REQUIRE(chdir("../a") == 0, "chdir ../a");
		CHECK(kind() == S_IFREG, "a/f after chdir ../a: %d", kind());
		REQUIRE(chdir("..") == 0, "chdir ..");
		CHECK(kind() == -ENOENT, "f in DIR: %d", kind());
	}

	/* A child in b asks as its parent, in a, asks (one serving thread
	 * serves both in the seccomp tier). */
	REQUIRE(chdir("a") == 0, "chdir a");
	int p[2];
	REQUIRE(pipe(p) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		if (fchdir(b) < 0 || read(p[0], &c, 1) != 1)
			_exit(3);
		_exit(kind() == S_IFDIR ? 0 : 4);
	}
	if (pid > 0) {
		CHECK(kind() == S_IFREG, "a/f in the parent: %d", kind());
		CHECK(write(p[1], "x", 1) == 1, "write");
		int st;
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "the child in b: status %#x", st);
		CHECK(kind() == S_IFREG, "a/f in the parent after the child: %d", kind());
	}

	/* An absolute path, then the same after another thread chrooted the
	 * process into b (root only): each in-process thread has its own
	 * serving state. */
	static char abs_f[] = "/f";
	struct stat st;
	CHECK(stat(abs_f, &st) < 0 && errno == ENOENT, "/f before the chroot: found");
	if (geteuid() == 0) {
		pthread_t th;
		CHECK(pthread_create(&th, NULL, jail, NULL) == 0 && pthread_join(th, NULL) == 0, "the chroot's thread");
		CHECK(stat(abs_f, &st) == 0 && S_ISDIR(st.st_mode), "/f after another thread's chroot into b");
	}
	if (!bad)
		printf("ok\n");
	return bad;
}
