/* shadowino FILE...: each FILE is created and held open for writing, all
 * at once, then each fd's fstat (newfstatat with AT_EMPTY_PATH, as glibc
 * and coreutils make it) must name the file's own inode, as stat of its
 * path does. Under kbox every FILE is a shadow; files on two filesystems
 * (the image and /tmp) have content files in two stores whose inode
 * numbers coincide, and kbox must still tell them apart. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int fds[16], bad = 0;
	for (int i = 1; i < argc && i < 16; i++) {
		fds[i] = open(argv[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fds[i] < 0) {
			perror(argv[i]);
			return 1;
		}
	}
	for (int i = 1; i < argc && i < 16; i++) {
		struct stat byfd, bypath;
		if (syscall(SYS_newfstatat, fds[i], "", &byfd, AT_EMPTY_PATH) < 0 || stat(argv[i], &bypath) < 0) {
			perror(argv[i]);
			return 1;
		}
		int same = byfd.st_ino == bypath.st_ino && byfd.st_dev == bypath.st_dev;
		printf("%s: fstat names its inode: %s\n", argv[i], same ? "yes" : "no");
		bad |= !same;
	}
	return bad;
}
