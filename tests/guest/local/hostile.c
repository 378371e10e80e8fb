/*
 * hostile: a hostile guest program for TestHostileDefault
 * (tests/hostile_test.go). It tries to read the host file argv[1]
 * through a `syscall; ret` sequence found in an executable mapping that
 * is not its own (probe/guest/gadget.c), as a program that attacks kbox
 * on purpose would, and prints what it got.
 *
 * Exit status 0 and "ESCAPED" when the host file was read; 3 and
 * "confined" otherwise. The test builds it static and dynamic.
 */
#include "gadget.c"

int main(int argc, char **argv)
{
	char buf[4096], why[512];
	if (argc != 2) {
		fprintf(stderr, "usage: gadget HOST-FILE\n");
		return 2;
	}
	if (gadget_read(argv[1], buf, sizeof buf, why, sizeof why) >= 0) {
		printf("ESCAPED: %s\n%s\n", why, buf);
		return 0;
	}
	int fd = open(argv[1], O_RDONLY);
	printf("confined: %s; open(%s): %s\n", why, argv[1], fd < 0 ? strerror(errno) : "opened a file of the image");
	return 3;
}
