/*
 * statahead DIR make: fills DIR for the walks below (TestStatAhead):
 * "flat", 400 files of several sizes and modes with hard links, symlinks
 * (to files, to a directory, dangling), a FIFO, a name of 250 bytes, a
 * directory only root may search ("locked") and one nobody may
 * ("nosearch"); "tree", directories of files in directories, with files
 * after the directories; "deep", paths that grow past 511 bytes.
 *
 * statahead DIR walk: walks DIR depth first as busybox find does (a
 * directory listed, then each entry's lstat, stat and statx by its full
 * path, and a directory walked before the next entry) and prints a line
 * for each answer. Every tier must print the same (the rewrite tier
 * answers such calls from what each listing prepared:
 * dispatch/hint_stat.go, trap/hint_stat.c).
 *
 * statahead DIR cases: walks DIR/flat, so that its answers are prepared,
 * then asks in ways the prepared answers must not change: bad and
 * read-only buffers, a buffer that runs into a page it may not write,
 * paths that fault, the same buffer holding other names, other spellings
 * of a path, a stat that follows a symlink, flags, relative paths, the
 * old stat and lstat calls, statx with other flags and masks, and other
 * threads. Each answer is compared with the one in the directory's fd,
 * which only Go gives. Prints "CASE: ok" lines and FAIL lines.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

#define NFLAT 400

static void mkfile(const char *path, int size, int mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	REQUIRE(fd >= 0, "create %s", path);
	for (int i = 0; i < size; i++)
		REQUIRE(write(fd, "x", 1) == 1, "write %s", path);
	close(fd);
	REQUIRE(chmod(path, mode) == 0, "chmod %s", path);
}

static void make(const char *dir)
{
	char p[1024], q[1024];
	REQUIRE(mkdir(dir, 0755) == 0, "mkdir %s", dir);
	snprintf(p, sizeof p, "%s/flat", dir);
	REQUIRE(mkdir(p, 0755) == 0, "mkdir %s", p);
	static const int modes[] = {0644, 0600, 0755, 0444, 0640};
	for (int i = 0; i < NFLAT; i++) {
		snprintf(p, sizeof p, "%s/flat/f%03d", dir, i);
		mkfile(p, (i * 37) % 5000, modes[i % 5]);
	}
	for (int i = 0; i < 20; i++) {
		snprintf(p, sizeof p, "%s/flat/f%03d", dir, i);
		snprintf(q, sizeof q, "%s/flat/h%03d", dir, i);
		REQUIRE(link(p, q) == 0, "link %s", q);
		snprintf(p, sizeof p, "f%03d", i * 3);
		snprintf(q, sizeof q, "%s/flat/l%03d", dir, i);
		REQUIRE(symlink(p, q) == 0, "symlink %s", q);
	}
	snprintf(q, sizeof q, "%s/flat/dangle", dir);
	REQUIRE(symlink("nowhere", q) == 0, "symlink %s", q);
	snprintf(q, sizeof q, "%s/flat/ldir", dir);
	REQUIRE(symlink("locked", q) == 0, "symlink %s", q);
	snprintf(q, sizeof q, "%s/flat/fifo", dir);
	REQUIRE(mkfifo(q, 0644) == 0, "mkfifo %s", q);
	char longname[251];
	memset(longname, 'n', 250);
	longname[250] = 0;
	snprintf(q, sizeof q, "%s/flat/%s", dir, longname);
	mkfile(q, 9, 0644);
	const char *closed[] = {"locked", "nosearch"};
	for (int k = 0; k < 2; k++) {
		snprintf(p, sizeof p, "%s/flat/%s", dir, closed[k]);
		REQUIRE(mkdir(p, 0755) == 0, "mkdir %s", p);
		for (int i = 0; i < 5; i++) {
			snprintf(q, sizeof q, "%s/g%d", p, i);
			mkfile(q, i, 0644);
		}
		REQUIRE(chmod(p, k == 0 ? 0700 : 0644) == 0, "chmod %s", p);
	}
	snprintf(p, sizeof p, "%s/tree", dir);
	REQUIRE(mkdir(p, 0755) == 0, "mkdir %s", p);
	for (int a = 0; a < 6; a++) {
		snprintf(p, sizeof p, "%s/tree/a%d", dir, a);
		REQUIRE(mkdir(p, 0755) == 0, "mkdir %s", p);
		for (int b = 0; b < 5; b++) {
			snprintf(p, sizeof p, "%s/tree/a%d/b%d", dir, a, b);
			REQUIRE(mkdir(p, 0755) == 0, "mkdir %s", p);
			for (int i = 0; i < 12; i++) {
				snprintf(q, sizeof q, "%s/x%d", p, i);
				mkfile(q, i * a, 0644);
			}
		}
		for (int i = 0; i < 10; i++) {
			snprintf(q, sizeof q, "%s/tree/a%d/y%d", dir, a, i);
			mkfile(q, i, 0600);
		}
	}
	for (int i = 0; i < 10; i++) {
		snprintf(q, sizeof q, "%s/tree/z%d", dir, i);
		mkfile(q, i, 0644);
	}
	/* deep: each level's name is 60 bytes, with a file at each */
	snprintf(p, sizeof p, "%s/deep", dir);
	REQUIRE(mkdir(p, 0755) == 0, "mkdir %s", p);
	for (int level = 0; level < 12; level++) {
		size_t n = strlen(p);
		snprintf(p + n, sizeof p - n, "/%059d", level);
		REQUIRE(mkdir(p, 0755) == 0, "mkdir %s", p);
		snprintf(q, sizeof q, "%s/file", p);
		mkfile(q, level, 0644);
	}
	printf("made %s\n", dir);
}

/* The stats below come from these sites of their own, each the 7 bytes
 * mov $nr,%eax; syscall that the rewrite tier patches once it trapped 64
 * times (not inlined: one site each); the buffer given is the kernel's
 * (libc's wrappers may pass one of their own). Each returns 0, or -1
 * with errno set. */
static int sys_ret(long r)
{
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return (int)r;
}

static __attribute__((noinline)) int raw_fstatat(long dirfd, const void *path, void *buf, long flags)
{
	long r;
	register long r10 __asm__("r10") = flags;
	__asm__ volatile("mov $262, %%eax\n\tsyscall" : "=a"(r) : "D"(dirfd), "S"(path), "d"(buf), "r"(r10) : "rcx", "r11", "memory");
	return sys_ret(r);
}

static __attribute__((noinline)) int raw_stat(const void *path, void *buf)
{
	long r;
	__asm__ volatile("mov $4, %%eax\n\tsyscall" : "=a"(r) : "D"(path), "S"(buf) : "rcx", "r11", "memory");
	return sys_ret(r);
}

static __attribute__((noinline)) int raw_lstat(const void *path, void *buf)
{
	long r;
	__asm__ volatile("mov $6, %%eax\n\tsyscall" : "=a"(r) : "D"(path), "S"(buf) : "rcx", "r11", "memory");
	return sys_ret(r);
}

static __attribute__((noinline)) int raw_statx(long dirfd, const void *path, long flags, long mask, void *buf)
{
	long r;
	register long r10 __asm__("r10") = mask;
	register void *r8 __asm__("r8") = buf;
	__asm__ volatile("mov $332, %%eax\n\tsyscall" : "=a"(r) : "D"(dirfd), "S"(path), "d"(flags), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
	return sys_ret(r);
}

#define SX_SIZE 256     /* struct statx (musl's headers may lack it) */
#define SX_BASIC 0x7ffU /* STATX_BASIC_STATS */

/* sxline prints a statx answer: its bytes up to stx_mnt_id's end. */
static void sxline(const char *what, const char *path, int r, const unsigned char *sx)
{
	if (r != 0) {
		printf("%s %s %s\n", what, path, errname(errno));
		return;
	}
	printf("%s %s ", what, path);
	for (int i = 0; i < 152; i++)
		printf("%02x", sx[i]);
	printf("\n");
}

static void line(const char *what, const char *path, int r, const struct stat *st)
{
	if (r != 0) {
		printf("%s %s %s\n", what, path, errname(errno));
		return;
	}
	printf("%s %s dev=%lu ino=%lu mode=%o nlink=%lu uid=%u gid=%u rdev=%lu size=%ld blksize=%ld blocks=%ld "
	       "atime=%ld.%09ld mtime=%ld.%09ld ctime=%ld.%09ld\n",
	       what, path, (unsigned long)st->st_dev, (unsigned long)st->st_ino, st->st_mode, (unsigned long)st->st_nlink,
	       st->st_uid, st->st_gid, (unsigned long)st->st_rdev, (long)st->st_size, (long)st->st_blksize, (long)st->st_blocks,
	       (long)st->st_atim.tv_sec, st->st_atim.tv_nsec, (long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
	       (long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* walk lists path, then lstats, stats and statxes each entry, walking
 * into a directory before the next entry; quiet: no lines. */
static void walk(const char *path, int quiet)
{
	DIR *d = opendir(path);
	if (d == NULL) {
		if (!quiet)
			printf("opendir %s %s\n", path, errname(errno));
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char full[4096];
		snprintf(full, sizeof full, "%s/%s", path, e->d_name);
		struct stat st;
		int r = raw_fstatat(AT_FDCWD, full, &st, AT_SYMLINK_NOFOLLOW);
		if (!quiet)
			line("l", full, r, &st);
		int dir = r == 0 && S_ISDIR(st.st_mode);
		r = raw_fstatat(AT_FDCWD, full, &st, 0);
		if (!quiet)
			line("s", full, r, &st);
		unsigned char sx[SX_SIZE];
		r = raw_statx(AT_FDCWD, full, AT_SYMLINK_NOFOLLOW, SX_BASIC, sx);
		if (!quiet)
			sxline("x", full, r, sx);
		if (!quiet) {
			/* the old calls, at their own sites */
			r = raw_lstat(full, &st);
			line("L", full, r, &st);
			r = raw_stat(full, &st);
			line("S", full, r, &st);
		}
		if (dir)
			walk(full, quiet);
	}
	closedir(d);
}

static char flat[512];
static int flatfd;

/* same compares two answers field by field. */
static int same(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode && a->st_nlink == b->st_nlink &&
	       a->st_uid == b->st_uid && a->st_gid == b->st_gid && a->st_rdev == b->st_rdev && a->st_size == b->st_size &&
	       a->st_blksize == b->st_blksize && a->st_blocks == b->st_blocks && a->st_atim.tv_sec == b->st_atim.tv_sec &&
	       a->st_atim.tv_nsec == b->st_atim.tv_nsec && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* expect checks the answer r (errno e) to a stat of flat's name (nofollow
 * as asked) against fstatat in flat's fd, which Go answers. */
static void expect(const char *what, const char *name, int nofollow, int r, int e, const struct stat *got)
{
	struct stat ref;
	int rr = fstatat(flatfd, name, &ref, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
	int re = errno;
	if (rr != 0) {
		CHECK(r == -1 && e == re, "%s %s: %s, want %s", what, name, r == 0 ? "ok" : errname(e), errname(re));
		return;
	}
	CHECK(r == 0 && same(got, &ref), "%s %s: %d %s (ino %lu), want ino %lu", what, name, r, r ? errname(e) : "ok",
	      r ? 0UL : (unsigned long)got->st_ino, (unsigned long)ref.st_ino);
}

/* prepare walks flat, so that the rewrite tier holds its answers, after
 * a stat that only Go answers (of flat itself, not an entry) into this
 * stack: the answers go to buffers near the last one Go wrote. */
static void prepare(void)
{
	struct stat st;
	REQUIRE(raw_fstatat(AT_FDCWD, flat, &st, AT_SYMLINK_NOFOLLOW) == 0, "lstat %s", flat);
	walk(flat, 1);
}

static void case_buffers(void)
{
	char p[600];
	snprintf(p, sizeof p, "%s/f010", flat);
	long pg = sysconf(_SC_PAGESIZE);
	/* a read-only page, NULL, an unmapped page */
	char *ro = mmap(NULL, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *gone = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(ro != MAP_FAILED && gone != MAP_FAILED, "mmap");
	REQUIRE(munmap(gone, pg) == 0, "munmap");
	void *bufs[] = {ro, NULL, gone, (void *)1};
	for (int i = 0; i < 4; i++) {
		prepare();
		long r = raw_fstatat(AT_FDCWD, p, bufs[i], AT_SYMLINK_NOFOLLOW);
		CHECK(r == -1 && errno == EFAULT, "buffer %d: %ld %s, want EFAULT", i, r, errname(errno));
	}
	/* a buffer whose end is in a page that may not be written: the
	 * mapping's second page PROT_NONE */
	char *two = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(two != MAP_FAILED && mprotect(two + pg, pg, PROT_NONE) == 0, "mmap");
	struct stat *edge = (struct stat *)(two + pg - sizeof(struct stat) / 2);
	prepare();
	long r = raw_fstatat(AT_FDCWD, p, edge, AT_SYMLINK_NOFOLLOW);
	CHECK(r == -1 && errno == EFAULT, "edge: %ld %s, want EFAULT", r, errname(errno));
	/* a page of this stack, near the walk's buffers, made read-only */
	{
		static char *volatile page;
		char area[3 * 4096];
		page = (char *)(((uintptr_t)area + pg) & ~(uintptr_t)(pg - 1));
		prepare();
		REQUIRE(mprotect(page, pg, PROT_READ) == 0, "mprotect");
		r = raw_fstatat(AT_FDCWD, p, page, AT_SYMLINK_NOFOLLOW);
		int e = errno;
		REQUIRE(mprotect(page, pg, PROT_READ | PROT_WRITE) == 0, "mprotect back");
		CHECK(r == -1 && e == EFAULT, "a read-only stack page: %ld %s, want EFAULT", r, errname(e));
		/* and the buffer's end in it */
		prepare();
		REQUIRE(mprotect(page, pg, PROT_READ) == 0, "mprotect");
		r = raw_fstatat(AT_FDCWD, p, page - sizeof(struct stat) / 2, AT_SYMLINK_NOFOLLOW);
		e = errno;
		REQUIRE(mprotect(page, pg, PROT_READ | PROT_WRITE) == 0, "mprotect back");
		CHECK(r == -1 && e == EFAULT, "a buffer into a read-only stack page: %ld %s, want EFAULT", r, errname(e));
	}
	/* the walk's buffer in a mapping of its own, unmapped and mapped
	 * again in its place */
	struct stat *own = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(own != MAP_FAILED, "mmap");
	prepare();
	REQUIRE(raw_fstatat(AT_FDCWD, p, own, AT_SYMLINK_NOFOLLOW) == 0, "lstat");
	REQUIRE(munmap(own, pg) == 0, "munmap");
	r = raw_fstatat(AT_FDCWD, p, own, AT_SYMLINK_NOFOLLOW);
	CHECK(r == -1 && errno == EFAULT, "unmapped own: %ld %s, want EFAULT", r, errname(errno));
	/* (MAP_FIXED_NOREPLACE: unmapped, it is no longer the guest's to
	 * replace in the in-process tiers; something may be there now) */
	if (mmap(own, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == own) {
		r = raw_fstatat(AT_FDCWD, p, own, AT_SYMLINK_NOFOLLOW);
		expect("mapped again", "f010", 1, (int)r, errno, own);
	}
	printf("buffers: ok\n");
}

static void case_paths(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *two = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(two != MAP_FAILED && munmap(two + pg, pg) == 0, "mmap");
	struct stat st;
	/* the path runs into the unmapped page without its NUL; then with
	 * its NUL as the page's last byte */
	size_t n = strlen(flat) + 5; /* flat + "/f010" */
	char *at = two + pg - n;
	memcpy(at, flat, strlen(flat));
	memcpy(at + strlen(flat), "/f010", 5);
	prepare();
	long r = raw_fstatat(AT_FDCWD, at, &st, AT_SYMLINK_NOFOLLOW);
	CHECK(r == -1 && errno == EFAULT, "unterminated: %ld %s, want EFAULT", r, errname(errno));
	at = two + pg - n - 1;
	memcpy(at, flat, strlen(flat));
	memcpy(at + strlen(flat), "/f010", 6);
	r = raw_fstatat(AT_FDCWD, at, &st, AT_SYMLINK_NOFOLLOW);
	expect("at the page's end", "f010", 1, (int)r, errno, &st);
	r = raw_fstatat(AT_FDCWD, NULL, &st, AT_SYMLINK_NOFOLLOW);
	CHECK(r == -1 && errno == EFAULT, "NULL path: %ld %s, want EFAULT", r, errname(errno));
	/* one buffer, another name each time */
	char p[600];
	for (int i = 0; i < NFLAT; i += 7) {
		snprintf(p, sizeof p, "%s/f%03d", flat, i);
		r = raw_fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW);
		expect("rewritten", p + strlen(flat) + 1, 1, (int)r, errno, &st);
	}
	/* other spellings: Go's */
	const char *forms[][2] = {
	    {"%s//f011", "f011"}, {"%s/./f011", "f011"}, {"%s/f011/", "f011/"}, {"%s/../flat/f011", "../flat/f011"},
	    {"%s/f011/.", "f011/."}, {"%s/nosuch", "nosuch"}, {"%s/", "."},
	};
	for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
		snprintf(p, sizeof p, forms[i][0], flat);
		prepare();
		r = raw_fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW);
		expect("spelling", forms[i][1], 1, (int)r, errno, &st);
	}
	printf("paths: ok\n");
}

static void case_follow(void)
{
	char p[600];
	struct stat st;
	const char *names[] = {"l001", "l019", "dangle", "ldir", "fifo", "h005", "locked", "nosearch", "nosearch/g1", "locked/g1"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", flat, names[i]);
		prepare();
		int r = raw_fstatat(AT_FDCWD, p, &st, 0);
		expect("stat", names[i], 0, r, errno, &st);
		r = raw_fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW);
		expect("lstat", names[i], 1, r, errno, &st);
		r = raw_stat(p, &st);
		expect("SYS_stat", names[i], 0, r, errno, &st);
		r = raw_lstat(p, &st);
		expect("SYS_lstat", names[i], 1, r, errno, &st);
		r = lstat(p, &st);
		expect("libc lstat", names[i], 1, r, errno, &st);
	}
	printf("follow: ok\n");
}

static void case_flags(void)
{
	char p[600];
	struct stat st;
	snprintf(p, sizeof p, "%s/f012", flat);
	prepare();
	long r = raw_fstatat(AT_FDCWD, p, &st, 0x8000 | AT_SYMLINK_NOFOLLOW);
	CHECK(r == -1 && errno == EINVAL, "bad flag: %ld %s, want EINVAL", r, errname(errno));
	r = raw_fstatat(AT_FDCWD, p, &st, AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW);
	expect("AT_NO_AUTOMOUNT", "f012", 1, (int)r, errno, &st);
	r = raw_fstatat(-1, p, &st, AT_SYMLINK_NOFOLLOW); /* an absolute path ignores the dirfd */
	expect("dirfd -1", "f012", 1, (int)r, errno, &st);
	r = raw_fstatat(flatfd, "f012", &st, AT_SYMLINK_NOFOLLOW);
	expect("relative", "f012", 1, (int)r, errno, &st);
	REQUIRE(chdir(flat) == 0, "chdir");
	r = raw_fstatat(AT_FDCWD, "f013", &st, AT_SYMLINK_NOFOLLOW);
	expect("from the cwd", "f013", 1, (int)r, errno, &st);
	REQUIRE(chdir("/") == 0, "chdir /");
	printf("flags: ok\n");
}

/* expectx checks a statx answer (flags, mask as asked) against statx in
 * flat's fd, which Go answers. */
static void expectx(const char *what, const char *name, long flags, long mask, int r, int e, const unsigned char *got)
{
	unsigned char ref[SX_SIZE];
	int rr = raw_statx(flatfd, name, flags, mask, ref);
	int re = errno;
	if (rr != 0) {
		CHECK(r == -1 && e == re, "%s %s: %s, want %s", what, name, r == 0 ? "ok" : errname(e), errname(re));
		return;
	}
	CHECK(r == 0 && !memcmp(got, ref, 152), "%s %s: %s, want the answer in the directory's fd", what, name, r ? errname(e) : "another answer");
}

static void case_statx(void)
{
	char p[600];
	unsigned char sx[SX_SIZE];
	const char *names[] = {"f020", "l003", "dangle", "ldir", "fifo", "nosearch", "nosearch/g2", "locked/g2", "nosuch"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", flat, names[i]);
		prepare();
		int r = raw_statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW, SX_BASIC, sx);
		expectx("statx", names[i], AT_SYMLINK_NOFOLLOW, SX_BASIC, r, errno, sx);
		r = raw_statx(AT_FDCWD, p, 0, SX_BASIC, sx); /* following */
		expectx("statx following", names[i], 0, SX_BASIC, r, errno, sx);
		r = raw_statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW, SX_BASIC | 0x800, sx); /* another mask (STATX_BTIME) */
		expectx("statx another mask", names[i], AT_SYMLINK_NOFOLLOW, SX_BASIC | 0x800, r, errno, sx);
		r = raw_statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW | 0x2000, SX_BASIC, sx); /* AT_STATX_FORCE_SYNC */
		expectx("statx forcing a sync", names[i], AT_SYMLINK_NOFOLLOW | 0x2000, SX_BASIC, r, errno, sx);
	}
	snprintf(p, sizeof p, "%s/f021", flat);
	prepare();
	long r = raw_statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW, SX_BASIC, NULL);
	CHECK(r == -1 && errno == EFAULT, "statx into NULL: %ld %s, want EFAULT", r, errname(errno));
	r = raw_statx(AT_FDCWD, p, 0x40000000, SX_BASIC, sx);
	CHECK(r == -1 && errno == EINVAL, "statx, a bad flag: %ld %s, want EINVAL", r, errname(errno));
	long pg = sysconf(_SC_PAGESIZE);
	static char *volatile page;
	char area[3 * 4096];
	page = (char *)(((uintptr_t)area + pg) & ~(uintptr_t)(pg - 1));
	prepare();
	REQUIRE(mprotect(page, pg, PROT_READ) == 0, "mprotect");
	r = raw_statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW, SX_BASIC, page - 100);
	int e = errno;
	REQUIRE(mprotect(page, pg, PROT_READ | PROT_WRITE) == 0, "mprotect back");
	CHECK(r == -1 && e == EFAULT, "statx into a read-only stack page: %ld %s, want EFAULT", r, errname(e));
	printf("statx: ok\n");
}

static void *other(void *arg)
{
	(void)arg;
	char p[600];
	struct stat st;
	for (int round = 0; round < 3; round++) {
		prepare();
		for (int i = 0; i < NFLAT; i += 3) {
			snprintf(p, sizeof p, "%s/f%03d", flat, i);
			int r = raw_fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW);
			expect("thread", p + strlen(flat) + 1, 1, r, errno, &st);
		}
	}
	return NULL;
}

static void case_threads(void)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&t[i], NULL, other, NULL) == 0, "pthread_create");
	other(NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("threads: ok\n");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: statahead DIR make|walk|cases\n");
		return 2;
	}
	const char *dir = argv[1];
	if (!strcmp(argv[2], "make")) {
		make(dir);
		return bad;
	}
	if (!strcmp(argv[2], "walk")) {
		walk(dir, 0);
		return 0;
	}
	snprintf(flat, sizeof flat, "%s/flat", dir);
	flatfd = open(flat, O_RDONLY | O_DIRECTORY);
	REQUIRE(flatfd >= 0, "open %s", flat);
	/* enough stats at its site for the rewrite tier to patch it */
	for (int i = 0; i < 3; i++)
		prepare();
	case_buffers();
	case_paths();
	case_follow();
	case_flags();
	case_statx();
	case_threads();
	return bad;
}
