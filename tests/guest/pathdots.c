#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdlib.h>
/* Calls on paths whose last component is "." or "..", or that end in
 * slashes, in a new directory argv[2] of argv[1]: each call, its result
 * and errno, to compare with Linux (tests/pathdots_test.go). */
#define T(name, call) do { errno = 0; long r = (call); printf("%-34s %ld %s\n", name, r, r < 0 ? strerror(errno) : ""); } while (0)
int main(int argc, char **argv) {
	if (chdir(argv[1])) { perror("chdir"); return 1; }
	if (mkdir(argv[2], 0700) || chdir(argv[2])) { perror("mkdir"); return 1; }
	T("mkdir nx/.", mkdir("nx/.", 0700));
	T("mkdir nx/./", mkdir("nx/./", 0700));
	T("mkdir nx/..", mkdir("nx/..", 0700));
	T("mkdir nx/", mkdir("nx/", 0700));
	T("rmdir nx/.", rmdir("nx/."));
	T("mkdir nq/..", mkdir("nq/..", 0700));
	T("rmdir nq/..", rmdir("nq/.."));
	T("rmdir nq/.", rmdir("nq/."));
	T("open nq/../", open("nq/../", O_RDONLY));
	T("mkdir d", mkdir("d", 0700));
	T("mkdir d/.", mkdir("d/.", 0700));
	T("mkdir d/..", mkdir("d/..", 0700));
	T("rmdir d/.", rmdir("d/."));
	T("rmdir d/..", rmdir("d/.."));
	T("mkdir d2", mkdir("d2", 0700));
	T("rename d2 nz/.", rename("d2", "nz/."));
	T("rename d2 f/.", rename("d2", "f/."));
	T("rename d2 nz/..", rename("d2", "nz/.."));
	T("rename d2 nz/./", rename("d2", "nz/./"));
	T("rename d2 nz/", rename("d2", "nz/"));
	T("rename d2 d/./", rename("d2", "d/./"));
	T("rename nz/. d2", rename("nz/.", "d2"));
	T("mkdir nw/./.", mkdir("nw/./.", 0700));
	T("mkdir nv//", mkdir("nv//", 0700));
	T("rmdir nv/./", rmdir("nv/./"));
	T("rename d2 nx/.", rename("d2", "nx/."));
	T("rename d2 d/.", rename("d2", "d/."));
	T("rename d/. d3", rename("d/.", "d3"));
	T("rename d2/ d4/", rename("d2/", "d4/"));
	T("rename d4 d2", rename("d4", "d2"));
	T("creat f", creat("f", 0600));
	T("rename f g/", rename("f", "g/"));
	T("rename f/ g", rename("f/", "g"));
	T("open f/.", open("f/.", O_RDONLY));
	T("open nx2/. creat", open("nx2/.", O_CREAT|O_WRONLY, 0600));
	T("open d/. creat", open("d/.", O_CREAT|O_WRONLY, 0600));
	T("link f d/.", link("f", "d/."));
	T("link f h/", link("f", "h/"));
	T("symlink f d/.", symlink("f", "d/."));
	T("symlink f s/", symlink("f", "s/"));
	T("unlink d/.", unlink("d/."));
	T("unlink f/", unlink("f/"));
	T("mknod d/. fifo", mknod("d/.", S_IFIFO|0600, 0));
	T("mkfifo nx3/", mkfifo("nx3/", 0600));
	struct stat st;
	T("stat nx (created?)", stat("nx", &st));
	T("stat d3", stat("d3", &st));
	T("stat g", stat("g", &st));
	T("stat h", stat("h", &st));
	T("stat s", lstat("s", &st));
	T("stat nx2", stat("nx2", &st));
	T("stat nx3", stat("nx3", &st));
	return 0;
}
