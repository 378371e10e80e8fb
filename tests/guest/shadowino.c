/* shadowino FILE...: each FILE is created and held open for writing, all
 * at once, then each fd's fstat must name the file's own inode, as stat
 * of its path does, by both calls that make one: newfstatat with
 * AT_EMPTY_PATH (glibc's and coreutils') and the legacy fstat (musl's),
 * whose device, inode, mode, owner, size and modification time must be
 * the path's. Under kbox every FILE is a shadow; files on two
 * filesystems (the image and /tmp) have content files in two stores
 * whose inode numbers coincide, and kbox must still tell them apart.
 * shadowino -c FILE... also forks a child whose legacy fstat of each
 * inherited fd must be the path's stat too; shadowino -s FILE... also
 * wants each fd without seals, as an ext4 file (F_GET_SEALS and
 * F_ADD_SEALS EINVAL; a tmpfs file has F_SEAL_SEAL), where a shadow's
 * content memfd has them. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int same(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_mode == b->st_mode &&
	       a->st_uid == b->st_uid && a->st_gid == b->st_gid && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

int main(int argc, char **argv)
{
	int fds[16], bad = 0, child = 0, seals = 0;
	for (; argc > 1 && argv[1][0] == '-'; argv++, argc--) {
		child |= strcmp(argv[1], "-c") == 0;
		seals |= strcmp(argv[1], "-s") == 0;
	}
	for (int i = 1; i < argc && i < 16; i++) {
		fds[i] = open(argv[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fds[i] < 0 || write(fds[i], "x", 1) != 1) {
			perror(argv[i]);
			return 1;
		}
	}
	for (int i = 1; i < argc && i < 16; i++) {
		struct stat byfd, legacy, bypath;
		if (syscall(SYS_newfstatat, fds[i], "", &byfd, AT_EMPTY_PATH) < 0 || stat(argv[i], &bypath) < 0) {
			perror(argv[i]);
			return 1;
		}
		int ok = byfd.st_ino == bypath.st_ino && byfd.st_dev == bypath.st_dev;
		printf("%s: fstat names its inode: %s\n", argv[i], ok ? "yes" : "no");
		bad |= !ok;
#ifdef SYS_fstat
		if (syscall(SYS_fstat, fds[i], &legacy) < 0) {
			perror(argv[i]);
			return 1;
		}
		ok = same(&legacy, &bypath);
		printf("%s: legacy fstat is its stat: %s\n", argv[i], ok ? "yes" : "no");
		if (!ok)
			printf("  fstat dev %lu ino %lu mode %o uid %u size %ld, stat dev %lu ino %lu mode %o uid %u size %ld\n",
			       (unsigned long)legacy.st_dev, (unsigned long)legacy.st_ino, (unsigned)legacy.st_mode,
			       (unsigned)legacy.st_uid, (long)legacy.st_size, (unsigned long)bypath.st_dev,
			       (unsigned long)bypath.st_ino, (unsigned)bypath.st_mode, (unsigned)bypath.st_uid,
			       (long)bypath.st_size);
		bad |= !ok;
#endif
		if (seals) {
			errno = 0;
			int get = fcntl(fds[i], F_GET_SEALS), get_errno = errno;
			int add = fcntl(fds[i], F_ADD_SEALS, F_SEAL_WRITE), add_errno = errno;
			ok = get == -1 && get_errno == EINVAL && add == -1 && add_errno == EINVAL;
			printf("%s: no seals, as an ext4 file: %s\n", argv[i], ok ? "yes" : "no");
			if (!ok)
				printf("  F_GET_SEALS %d (%s), F_ADD_SEALS %d (%s)\n", get, strerror(get_errno), add,
				       strerror(add_errno));
			bad |= !ok;
		}
	}
#ifdef SYS_fstat
	if (child) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			for (int i = 1; i < argc && i < 16; i++) {
				struct stat legacy, bypath;
				int ok = syscall(SYS_fstat, fds[i], &legacy) == 0 && stat(argv[i], &bypath) == 0 &&
					 same(&legacy, &bypath);
				printf("%s: a child's legacy fstat is its stat: %s\n", argv[i], ok ? "yes" : "no");
				bad |= !ok;
			}
			fflush(stdout);
			_exit(bad);
		}
		int status;
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			bad = 1;
	}
#endif
	return bad;
}
