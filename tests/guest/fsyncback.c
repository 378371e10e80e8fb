/* fsyncback: a write made visible to other processes by fsync alone.
 *
 *   fsyncback FILE
 *
 * creates FILE, writes a line, fsyncs, and while the file is still open
 * runs `cat FILE` in a child; then the same with fdatasync. Prints what
 * cat printed. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int show(const char *file)
{
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/cat", "cat", file, (char *)NULL);
		_exit(127);
	}
	int st;
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("fsyncback: open");
		return 1;
	}
	const char *a = "after fsync\n", *b = "after fdatasync\n";
	if (write(fd, a, strlen(a)) != (ssize_t)strlen(a) || fsync(fd) != 0 || show(argv[1]))
		return 1;
	if (write(fd, b, strlen(b)) != (ssize_t)strlen(b) || fdatasync(fd) != 0 || show(argv[1]))
		return 1;
	return close(fd) != 0;
}
