/*
 * fault_floor: what a first write to a page of memory costs on this
 * machine, with no kbox (docs/benchmarks.md, "A CPU without FSGSBASE").
 * Every kbox run writes some 4,000 pages for the first time (its kernel's
 * memory, Go's heap, its relocated data); where the host is a
 * paravirtualized VM whose hypervisor shadows page tables, each first
 * write costs a fault in the host kernel and one in the hypervisor.
 *
 *   fault_floor FILE
 * prints, in ns a 4 KB page, the median of 5 rounds over 32 MB:
 *   anon       an anonymous page written, one fault a page
 *   populated  MADV_POPULATE_WRITE of the range, then its first write
 *              (what the populate leaves: the hypervisor's part)
 *   cow        a private mapping of FILE written (copy on write: what
 *              the dynamic loader's relocations of a PIE cost a page)
 *   read       a private mapping of FILE read (the kernel maps 16 pages
 *              a fault)
 *   huge       an anonymous range given transparent huge pages
 *              (MADV_HUGEPAGE, 2 MB aligned) written, a 2 MB fault for
 *              512 pages; "none" when the host gives no huge page
 *
 * Build: cc -O2 scripts/fault_floor.c -o /tmp/fault_floor
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define SIZE (32UL << 20)
#define PAGE 4096UL
#define HUGE (2UL << 20)
#define ROUNDS 5

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* touch writes (or reads) one byte a page and returns ns a page. */
static double touch(volatile char *p, unsigned long size, int write)
{
	char sum = 0;
	double t = now_ns();
	for (unsigned long i = 0; i < size; i += PAGE) {
		if (write)
			p[i] = 1;
		else
			sum += p[i];
	}
	(void)sum;
	return (now_ns() - t) / (size / PAGE);
}

static double anon(int populate)
{
	char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	if (populate && madvise(p, SIZE, MADV_POPULATE_WRITE) != 0)
		die("MADV_POPULATE_WRITE");
	double ns = touch(p, SIZE, 1);
	munmap(p, SIZE);
	return ns;
}

static double file(int fd, int write)
{
	char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		die("mmap FILE");
	double ns = touch(p, SIZE, write);
	munmap(p, SIZE);
	return ns;
}

/* huge returns ns a page written in a huge-page range, or -1 if the host
 * gave no huge page. */
static double huge(void)
{
	char *raw = mmap(NULL, SIZE + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		die("mmap");
	char *p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	double ns = -1;
	unsigned char vec[1];
	/* one write making the whole first 2 MB resident: a huge page */
	if (madvise(p, SIZE, MADV_HUGEPAGE) == 0) {
		double t = now_ns();
		p[0] = 1;
		t = now_ns() - t;
		if (mincore(p + HUGE - PAGE, PAGE, vec) == 0 && (vec[0] & 1))
			ns = (t + touch(p + HUGE, SIZE - HUGE, 1) * ((SIZE - HUGE) / PAGE)) / (SIZE / PAGE);
	}
	munmap(raw, SIZE + HUGE);
	return ns;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof *v, cmp);
	return v[ROUNDS / 2];
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fault_floor FILE (of %lu MB or more)\n", SIZE >> 20);
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		die(argv[1]);
	if (lseek(fd, 0, SEEK_END) < (off_t)SIZE) {
		fprintf(stderr, "fault_floor: %s is smaller than %lu MB\n", argv[1], SIZE >> 20);
		return 2;
	}
	double a[ROUNDS], pw[ROUNDS], c[ROUNDS], r[ROUNDS], h[ROUNDS];
	for (int i = 0; i < ROUNDS; i++) {
		a[i] = anon(0);
		pw[i] = anon(1);
		c[i] = file(fd, 1);
		r[i] = file(fd, 0);
		h[i] = huge();
	}
	printf("ns/page: anon %.0f  populated %.0f  cow %.0f  read %.0f  ", median(a), median(pw), median(c), median(r));
	double hm = median(h);
	if (hm < 0)
		printf("huge none\n");
	else
		printf("huge %.0f\n", hm);
	return 0;
}
