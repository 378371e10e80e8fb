/* loopt: loop devices at the ioctl level, as guest root on a kernel with
 * the loop driver. Each check prints one line "NAME ok" or "NAME FAIL
 * (what)"; the last line is "loopt: N failed". Modes:
 *
 *   loopt ctl          LOOP_CTL_GET_FREE, LOOP_CTL_ADD (the node appears in
 *                      /dev), LOOP_CTL_REMOVE (it goes), errors of each
 *   loopt io           a loop device on a file of /tmp with LOOP_CONFIGURE:
 *                      its size, status, data both ways, LOOP_CLR_FD, and
 *                      LOOP_SET_FD, LOOP_SET_STATUS64, LOOP_CHANGE_FD
 *   loopt hostile      hostile pointers (EFAULT) and fds that are not LKL
 *                      files (EBADF): an fd never opened, a pipe
 *   loopt hostfd FILE  LOOP_SET_FD / LOOP_CONFIGURE with FILE (a host file:
 *                      under a -b bind) refused with EBADF
 *   loopt disks        LKL's own disks (the numbers /sys/block lists for
 *                      vd*): a node of theirs opens with ENXIO and does not
 *                      mount (ENXIO) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* linux/loop.h and linux/fs.h, which musl does not ship. */
#define LOOP_SET_FD 0x4C00
#define LOOP_CLR_FD 0x4C01
#define LOOP_SET_STATUS64 0x4C04
#define LOOP_GET_STATUS64 0x4C05
#define LOOP_CHANGE_FD 0x4C06
#define LOOP_CONFIGURE 0x4C0A
#define LOOP_CTL_ADD 0x4C80
#define LOOP_CTL_REMOVE 0x4C81
#define LOOP_CTL_GET_FREE 0x4C82
#define LO_FLAGS_READ_ONLY 1
#ifndef BLKGETSIZE64
#define BLKGETSIZE64 0x80081272
#endif
#ifndef BLKSSZGET
#define BLKSSZGET 0x1268
#endif
#ifndef BLKROGET
#define BLKROGET 0x125E
#endif

struct loop_info64 {
	uint64_t lo_device, lo_inode, lo_rdevice, lo_offset, lo_sizelimit;
	uint32_t lo_number, lo_encrypt_type, lo_encrypt_key_size, lo_flags;
	uint8_t lo_file_name[64], lo_crypt_name[64], lo_encrypt_key[32];
	uint64_t lo_init[2];
};

struct loop_config {
	uint32_t fd, block_size;
	struct loop_info64 info;
	uint64_t reserved[8];
};

static int failed;

static void check(const char *name, int good, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void check(const char *name, int good, const char *fmt, ...)
{
	if (good) {
		printf("%s ok\n", name);
		return;
	}
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	printf("%s FAIL (%s)\n", name, b);
	failed++;
}

/* expect: a call that must fail with errno want. */
#define expect(name, call, want)                                                                   \
	do {                                                                                       \
		errno = 0;                                                                         \
		long r_ = (long)(call);                                                            \
		int e_ = errno;                                                                    \
		check(name, r_ == -1 && e_ == (want), "got %ld errno %d %s, want errno %d %s", r_, \
		      e_, strerror(e_), want, strerror(want));                                    \
	} while (0)

static int ctlfd(void)
{
	int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("open /dev/loop-control FAIL (%s)\n", strerror(errno));
		printf("loopt: 1 failed\n");
		exit(1);
	}
	return fd;
}

/* freeloop returns an open fd of a free loop device and its number. */
static int freeloop(int ctl, int *num)
{
	int n = ioctl(ctl, LOOP_CTL_GET_FREE);
	char p[64];
	snprintf(p, sizeof p, "/dev/loop%d", n);
	int fd = open(p, O_RDWR | O_CLOEXEC);
	check("get-free-open", n >= 0 && fd >= 0, "n %d open %s: %s", n, p, strerror(errno));
	*num = n;
	return fd;
}

/* mkfile makes a file of size bytes at p, its byte i being i%251. */
static void mkfile(const char *p, int size)
{
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	char *b = malloc(size);
	for (int i = 0; i < size; i++)
		b[i] = (char)(i % 251);
	int w = fd < 0 ? -1 : (int)write(fd, b, size);
	check("mkfile", w == size, "%s: %d %s", p, w, strerror(errno));
	free(b);
	close(fd);
}

static void ctl(void)
{
	int c = ctlfd();
	struct stat st;
	int n = ioctl(c, LOOP_CTL_GET_FREE);
	check("get-free", n >= 0, "%d %s", n, strerror(errno));
	int a = ioctl(c, LOOP_CTL_ADD, 77);
	check("add", a == 77, "%d %s", a, strerror(errno));
	int s = stat("/dev/loop77", &st);
	check("add-node", s == 0 && S_ISBLK(st.st_mode) && major(st.st_rdev) == 7 && minor(st.st_rdev) == 77,
	      "stat %d %s mode %o rdev %u:%u", s, strerror(errno), st.st_mode, major(st.st_rdev),
	      minor(st.st_rdev));
	int fd = open("/dev/loop77", O_RDWR);
	check("add-open", fd >= 0, "%s", strerror(errno));
	close(fd);
	expect("add-again", ioctl(c, LOOP_CTL_ADD, 77), EEXIST);
	int r = ioctl(c, LOOP_CTL_REMOVE, 77);
	check("remove", r == 0, "%d %s", r, strerror(errno));
	expect("remove-node", stat("/dev/loop77", &st), ENOENT);
	expect("remove-again", ioctl(c, LOOP_CTL_REMOVE, 77), ENODEV);
	/* A loop device's ioctls on loop-control, and the other way round. */
	expect("ctl-not-loop", ioctl(c, LOOP_CLR_FD, 0), ENOSYS);
	int l = open("/dev/loop0", O_RDWR);
	expect("loop-not-ctl", ioctl(l, LOOP_CTL_GET_FREE), EINVAL);
	close(l);
	close(c);
}

static void io(void)
{
	int c = ctlfd(), n;
	const int size = 1 << 20;
	mkfile("/tmp/loopt.img", size);
	int f = open("/tmp/loopt.img", O_RDWR | O_CLOEXEC);
	int l = freeloop(c, &n);
	struct loop_config cfg = {.fd = (uint32_t)f, .block_size = 0};
	strcpy((char *)cfg.info.lo_file_name, "/tmp/loopt.img");
	int r = ioctl(l, LOOP_CONFIGURE, &cfg);
	check("configure", r == 0, "%s", strerror(errno));
	close(f);
	uint64_t sz = 0;
	r = ioctl(l, BLKGETSIZE64, &sz);
	check("size64", r == 0 && sz == (uint64_t)size, "%d %s size %llu", r, strerror(errno),
	      (unsigned long long)sz);
	int ssz = 0;
	r = ioctl(l, BLKSSZGET, &ssz);
	check("sector-size", r == 0 && ssz == 512, "%d %s %d", r, strerror(errno), ssz);
	struct loop_info64 info;
	memset(&info, 0xff, sizeof info);
	r = ioctl(l, LOOP_GET_STATUS64, &info);
	check("status64", r == 0 && info.lo_number == (uint32_t)n && !strcmp((char *)info.lo_file_name, "/tmp/loopt.img"),
	      "%d %s number %u name %.64s", r, strerror(errno), info.lo_number, info.lo_file_name);
	unsigned char b[512];
	r = (int)pread(l, b, sizeof b, 4096);
	int same = r == (int)sizeof b;
	for (int i = 0; same && i < (int)sizeof b; i++)
		same = b[i] == (4096 + i) % 251;
	check("read-through", same, "pread %d %s", r, strerror(errno));
	memset(b, 'L', sizeof b);
	r = (int)pwrite(l, b, sizeof b, 8192);
	check("write-through", r == (int)sizeof b && fsync(l) == 0, "pwrite %d %s", r, strerror(errno));
	r = ioctl(l, LOOP_CLR_FD, 0);
	check("clr-fd", r == 0, "%s", strerror(errno));
	expect("clr-fd-again", ioctl(l, LOOP_CLR_FD, 0), ENXIO);
	expect("status64-unbound", ioctl(l, LOOP_GET_STATUS64, &info), ENXIO);
	close(l);
	f = open("/tmp/loopt.img", O_RDONLY);
	r = (int)pread(f, b, sizeof b, 8192);
	check("written-in-file", r == (int)sizeof b && b[0] == 'L' && b[511] == 'L', "pread %d %s %c", r,
	      strerror(errno), b[0]);
	close(f);

	/* LOOP_SET_FD of a read-only fd: a read-only device; then
	 * LOOP_SET_STATUS64 and LOOP_CHANGE_FD (only a read-only device
	 * may change its file, to one of the same size). */
	mkfile("/tmp/loopt2.img", size);
	f = open("/tmp/loopt.img", O_RDONLY | O_CLOEXEC);
	int f2 = open("/tmp/loopt2.img", O_RDONLY | O_CLOEXEC);
	l = freeloop(c, &n);
	r = ioctl(l, LOOP_SET_FD, f);
	check("set-fd", r == 0, "%s", strerror(errno));
	int ro = -1;
	r = ioctl(l, BLKROGET, &ro);
	check("set-fd-readonly", r == 0 && ro == 1, "%d %s ro %d", r, strerror(errno), ro);
	memset(&info, 0, sizeof info);
	strcpy((char *)info.lo_file_name, "renamed");
	r = ioctl(l, LOOP_SET_STATUS64, &info);
	memset(&info, 0, sizeof info);
	int r2 = ioctl(l, LOOP_GET_STATUS64, &info);
	check("set-status64", r == 0 && r2 == 0 && !strcmp((char *)info.lo_file_name, "renamed") &&
				      (info.lo_flags & LO_FLAGS_READ_ONLY),
	      "%d %d %s name %.64s flags %x", r, r2, strerror(errno), info.lo_file_name, info.lo_flags);
	r = ioctl(l, LOOP_CHANGE_FD, f2);
	check("change-fd", r == 0, "%s", strerror(errno));
	r = (int)pread(l, b, sizeof b, 8192);
	check("changed-data", r == (int)sizeof b && b[0] == 8192 % 251, "pread %d %s %d", r,
	      strerror(errno), b[0]);
	ioctl(l, LOOP_CLR_FD, 0);
	close(l);
	close(f);
	close(f2);
	close(c);
}

static void hostile(void)
{
	int c = ctlfd(), n;
	mkfile("/tmp/loopt3.img", 65536);
	int f = open("/tmp/loopt3.img", O_RDWR | O_CLOEXEC);
	int l = freeloop(c, &n);
	void *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	expect("configure-null", ioctl(l, LOOP_CONFIGURE, NULL), EFAULT);
	expect("configure-wild", ioctl(l, LOOP_CONFIGURE, (void *)0x10), EFAULT);
	expect("configure-kernel", ioctl(l, LOOP_CONFIGURE, (void *)0xffffffffff600000UL), EFAULT);
	expect("set-status64-wild", ioctl(l, LOOP_SET_STATUS64, (void *)0x10), EFAULT);
	expect("set-fd-never-open", ioctl(l, LOOP_SET_FD, 987), EBADF);
	expect("set-fd-negative", ioctl(l, LOOP_SET_FD, -1), EBADF);
	expect("set-fd-huge", ioctl(l, LOOP_SET_FD, 1L << 40), EBADF);
	int p[2];
	if (pipe(p) == 0) {
		expect("set-fd-pipe", ioctl(l, LOOP_SET_FD, p[0]), EBADF);
		struct loop_config cfg = {.fd = (uint32_t)p[1]};
		expect("configure-pipe", ioctl(l, LOOP_CONFIGURE, &cfg), EBADF);
	}
	/* O_PATH fds open nothing (fget refuses them): the image file's,
	 * and one of LKL's own disk by a node the guest made. */
	int op = open("/tmp/loopt3.img", O_PATH | O_CLOEXEC);
	expect("set-fd-opath", ioctl(l, LOOP_SET_FD, op), EBADF);
	unlink("/tmp/loopt-vda-path");
	if (mknod("/tmp/loopt-vda-path", S_IFBLK | 0600, makedev(254, 0)) == 0) {
		int vp = open("/tmp/loopt-vda-path", O_PATH | O_CLOEXEC);
		check("opath-disk", vp >= 0, "%s", strerror(errno));
		expect("set-fd-opath-disk", ioctl(l, LOOP_SET_FD, vp), EBADF);
	}
	int r = ioctl(l, LOOP_SET_FD, f);
	check("set-fd", r == 0, "%s", strerror(errno));
	expect("get-status64-readonly-mem", ioctl(l, LOOP_GET_STATUS64, ro), EFAULT);
	expect("get-status64-wild", ioctl(l, LOOP_GET_STATUS64, (void *)0x10), EFAULT);
	expect("size64-readonly-mem", ioctl(l, BLKGETSIZE64, ro), EFAULT);
	expect("size64-kernel", ioctl(l, BLKGETSIZE64, (void *)0xffff800000000000UL), EFAULT);
	expect("unknown-cmd", ioctl(l, 0x4CFF, 0), EINVAL);
	uint64_t sz = 0;
	r = ioctl(l, BLKGETSIZE64, &sz);
	check("still-bound", r == 0 && sz == 65536, "%d %s %llu", r, strerror(errno), (unsigned long long)sz);
	ioctl(l, LOOP_CLR_FD, 0);
	close(l);
	close(f);
	close(c);
}

static void hostfd(const char *file)
{
	int c = ctlfd(), n;
	int f = open(file, O_RDWR | O_CLOEXEC);
	check("host-open", f >= 0, "%s: %s", file, strerror(errno));
	int l = freeloop(c, &n);
	expect("set-fd-host", ioctl(l, LOOP_SET_FD, f), EBADF);
	struct loop_config cfg = {.fd = (uint32_t)f};
	expect("configure-host", ioctl(l, LOOP_CONFIGURE, &cfg), EBADF);
	/* A copy of the host fd in the virtual range, next to the virtual
	 * fds held (beyond them is EINVAL, as past RLIMIT_NOFILE). */
	int held = l > c ? l : c;
	int hi = fcntl(f, F_DUPFD_CLOEXEC, held + 1);
	check("host-dup-high", hi > held && held >= 1024, "%d %d %s", hi, held, strerror(errno));
	expect("set-fd-host-high", ioctl(l, LOOP_SET_FD, hi), EBADF);
	struct loop_info64 info;
	expect("unbound", ioctl(l, LOOP_GET_STATUS64, &info), ENXIO);
	close(l);
	close(c);
}

static void disks(void)
{
	DIR *d = opendir("/sys/block");
	struct dirent *ent;
	int found = 0;
	mkdir("/mnt/loopt", 0755);
	while (d && (ent = readdir(d))) {
		if (strncmp(ent->d_name, "vd", 2))
			continue;
		char p[300], num[32] = "";
		snprintf(p, sizeof p, "/sys/block/%s/dev", ent->d_name);
		FILE *fp = fopen(p, "r");
		unsigned maj, min;
		if (!fp || !fgets(num, sizeof num, fp) || sscanf(num, "%u:%u", &maj, &min) != 2) {
			check("disk-number", 0, "%s", p);
			continue;
		}
		fclose(fp);
		found++;
		char node[300], name[300];
		snprintf(node, sizeof node, "/tmp/loopt-%s", ent->d_name);
		unlink(node);
		int r = mknod(node, S_IFBLK | 0600, makedev(maj, min));
		snprintf(name, sizeof name, "disk-%s-mknod", ent->d_name);
		check(name, r == 0, "%s", strerror(errno));
		snprintf(name, sizeof name, "disk-%s-open-rw", ent->d_name);
		expect(name, open(node, O_RDWR), ENXIO);
		snprintf(name, sizeof name, "disk-%s-open-ro", ent->d_name);
		expect(name, open(node, O_RDONLY), ENXIO);
		snprintf(name, sizeof name, "disk-%s-open-excl", ent->d_name);
		expect(name, open(node, O_RDONLY | O_EXCL), ENXIO);
		snprintf(name, sizeof name, "disk-%s-mount", ent->d_name);
		expect(name, mount(node, "/mnt/loopt", "ext4", MS_RDONLY, NULL), ENXIO);
		/* The /dev name, when the guest made one there too. */
		snprintf(node, sizeof node, "/dev/%s", ent->d_name);
		if (mknod(node, S_IFBLK | 0600, makedev(maj, min)) == 0) {
			snprintf(name, sizeof name, "disk-%s-dev-open", ent->d_name);
			expect(name, open(node, O_RDWR), ENXIO);
			unlink(node);
		}
	}
	check("disks-found", found > 0, "no vd* in /sys/block");
	if (d)
		closedir(d);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: loopt ctl|io|hostile|hostfd FILE|disks\n");
		return 2;
	}
	if (!strcmp(argv[1], "ctl"))
		ctl();
	else if (!strcmp(argv[1], "io"))
		io();
	else if (!strcmp(argv[1], "hostile"))
		hostile();
	else if (!strcmp(argv[1], "hostfd") && argc > 2)
		hostfd(argv[2]);
	else if (!strcmp(argv[1], "disks"))
		disks();
	else {
		fprintf(stderr, "loopt: unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("loopt: %d failed\n", failed);
	return failed != 0;
}
