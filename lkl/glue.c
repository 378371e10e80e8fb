//go:build lkl

/* Thin wrappers over liblkl calls whose arguments cgo cannot express well. */
#include <string.h>
#include <lkl.h>
#include <lkl_host.h>
#include "lkl_glue.h"

/* Disks added so far, kept so that lkl_disk_remove gets the handle that
 * lkl_disk_add filled in. */
#define KBOX_MAX_DISKS 16
static struct lkl_disk disks[KBOX_MAX_DISKS];

int kbox_lkl_disk_add(int fd)
{
	struct lkl_disk disk;
	int id;

	memset(&disk, 0, sizeof(disk));
	disk.fd = fd;
	id = lkl_disk_add(&disk);
	if (id >= KBOX_MAX_DISKS) {
		lkl_disk_remove(disk);
		return -24; /* EMFILE */
	}
	if (id >= 0)
		disks[id] = disk;
	return id;
}

/* A copy-on-write disk (cow.c) made by kbox_cow_new and given its layers;
 * the disk owns it from now on, also when adding it fails. */
int kbox_lkl_disk_add_cow(void *cow)
{
	struct lkl_disk disk;
	int id;

	if (kbox_cow_layers(cow) == 0) {
		kbox_cow_free(cow);
		return -22; /* EINVAL: no layer to write */
	}
	memset(&disk, 0, sizeof(disk));
	disk.handle = cow;
	disk.ops = kbox_cow_ops();
	id = lkl_disk_add(&disk);
	if (id >= KBOX_MAX_DISKS) {
		lkl_disk_remove(disk);
		kbox_cow_free(disk.handle);
		return -24; /* EMFILE */
	}
	if (id < 0) {
		kbox_cow_free(disk.handle);
		return id;
	}
	disks[id] = disk;
	return id;
}

/* A new top layer on copy-on-write disk id (kbox_cow_push). */
int kbox_lkl_disk_push_cow(int id, int fd, unsigned char *map)
{
	if (id < 0 || id >= KBOX_MAX_DISKS || disks[id].dev == NULL || !kbox_cow_is(disks[id].ops))
		return -22; /* EINVAL */
	return kbox_cow_push(disks[id].handle, fd, map);
}

/* The layer holding the bytes at off of copy-on-write disk id
 * (kbox_cow_run); -1 for another disk. */
int kbox_lkl_disk_cow_run(int id, unsigned long long off, unsigned long long len, unsigned long long *run)
{
	if (id < 0 || id >= KBOX_MAX_DISKS || disks[id].dev == NULL || !kbox_cow_is(disks[id].ops))
		return -1;
	return kbox_cow_run(disks[id].handle, off, len, run);
}

/* The image's fd as a disk that fails requests in the given sector ranges
 * (faultdisk.c; tests only). */
int kbox_lkl_disk_add_faulty(int fd, const unsigned long long *ranges, int n)
{
	struct lkl_disk disk;
	int id;

	memset(&disk, 0, sizeof(disk));
	disk.handle = kbox_faulty_new(fd, ranges, n);
	if (!disk.handle)
		return -12; /* ENOMEM */
	disk.ops = kbox_faulty_ops();
	id = lkl_disk_add(&disk);
	if (id >= KBOX_MAX_DISKS) {
		lkl_disk_remove(disk);
		kbox_faulty_free(disk.handle);
		return -24; /* EMFILE */
	}
	if (id < 0) {
		kbox_faulty_free(disk.handle);
		return id;
	}
	disks[id] = disk;
	return id;
}

/* How many requests a faulty disk has failed so far; 0 for other disks. */
unsigned long long kbox_lkl_disk_failed(int id)
{
	if (id < 0 || id >= KBOX_MAX_DISKS || !kbox_faulty_is(disks[id].ops))
		return 0;
	return kbox_faulty_failed(disks[id].handle);
}

int kbox_lkl_disk_remove(int id)
{
	if (id < 0 || id >= KBOX_MAX_DISKS || disks[id].dev == NULL)
		return -22; /* EINVAL */
	int err = lkl_disk_remove(disks[id]);
	if (err == 0 && kbox_cow_is(disks[id].ops))
		kbox_cow_free(disks[id].handle);
	if (err == 0 && kbox_faulty_is(disks[id].ops))
		kbox_faulty_free(disks[id].handle);
	memset(&disks[id], 0, sizeof(disks[id]));
	return err;
}

int kbox_lkl_blkdev(unsigned int disk_id, unsigned int part, unsigned int *dev)
{
	uint32_t d = 0;
	int err = (int)kbox_cred_sync();

	if (err == 0)
		err = lkl_get_virtio_blkdev((int)disk_id, part, &d);

	*dev = d;
	return err;
}

long kbox_lkl_umount_dev(unsigned int disk_id, unsigned int part, int flags, long timeout_ms)
{
	long r = kbox_cred_sync();

	if (r < 0)
		return r;
	return lkl_umount_dev(disk_id, part, flags, timeout_ms);
}

long kbox_lkl_mount_dev(unsigned int disk_id, unsigned int part, const char *fstype,
			int flags, const char *opts, char *out, unsigned int outlen)
{
	long r = kbox_cred_sync();

	if (r < 0)
		return r;
	return lkl_mount_dev(disk_id, part, fstype, flags, opts, out, outlen);
}

long kbox_lkl_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	long params[6] = { a1, a2, a3, a4, a5, a6 };
	long r = kbox_cred_sync(); /* the caller's credentials (cred.c) */

	if (r < 0)
		return r;
	return lkl_syscall(nr, params);
}

/*
 * Kernel memory at a low address. LKL's memory map starts at pfn 0, so
 * free_area_init walks the hole below the memory LKL got from page_alloc,
 * one pageblock at a time: with memory at 0x7f..., the usual mmap address,
 * that is ~60 ms of every boot. Memory mapped low (1 GiB, else a few other
 * candidates) makes the walk negligible. Only the first large allocation
 * (the kernel's memory, at boot) is placed; everything else, and any
 * failure, goes to the original operations.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static void *(*orig_page_alloc)(unsigned long size);
static void (*orig_page_free)(void *addr, unsigned long size);
static void *low_mem;
static unsigned long low_size;

/*
 * Boot writes the two ends of the kernel's memory first: its first 3 MB
 * (the page allocator's early pages) and, memblock allocating top-down,
 * the last 2 MB, or 4 MB from 128M on (the memory map, 64 bytes a page,
 * and other tables): seen in /proc/PID/pagemap after boots of 32M to
 * 512M. One MADV_POPULATE_WRITE each makes those pages in one call
 * instead of a fault each (about 1,800 at 128M). A kernel without
 * MADV_POPULATE_WRITE (before 5.14) refuses it and boot faults them in.
 *
 * Where the memory is 2 MB aligned, the whole 2 MB pages of the two
 * ends (the bottom's first 2 MB, the top) ask for transparent huge pages
 * (MADV_HUGEPAGE) and the rest for none: boot's sparse writes between
 * them, and the bottom's third MB, stay small pages (a huge page there
 * would hold the fourth MB too, which boot does not write: 0.85 MB more
 * of an idle run), and a host whose THP mode is "always" gives a run no
 * more memory than one whose mode is "madvise". Where a first write is
 * costly (a paravirtualized VM, its hypervisor shadowing page tables: a
 * small page's first write about 14 µs, a huge page's 2 MB about 0.13
 * ms: scripts/fault_floor.c) the populate alone saves about a tenth of a
 * run's start-up, and huge pages as much again (docs/benchmarks.md). A
 * host without THP, or without a free huge page, populates small pages
 * as before.
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PREFAULT_BOTTOM (3UL << 20)
#define HUGE_SIZE (2UL << 20)
static unsigned long prefault_top(unsigned long size) { return size >= (128UL << 20) ? 4UL << 20 : 2UL << 20; }
static unsigned long huge_up(unsigned long n) { return (n + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1); }
static unsigned long huge_down(unsigned long n) { return n & ~(HUGE_SIZE - 1); }

static void prefault(char *p, unsigned long size)
{
	unsigned long bottom = PREFAULT_BOTTOM, top = prefault_top(size);

	if (bottom + top > size / 2)
		return;
	if (((unsigned long)p | size) % HUGE_SIZE == 0) {
		unsigned long hb = huge_down(bottom), ht = huge_down(top);
		madvise(p, hb, MADV_HUGEPAGE);
		madvise(p + hb, size - hb - ht, MADV_NOHUGEPAGE);
		madvise(p + size - ht, ht, MADV_HUGEPAGE);
	}
	madvise(p, bottom, MADV_POPULATE_WRITE);
	madvise(p + size - top, top, MADV_POPULATE_WRITE);
}

/* anon_huge_kb sums the AnonHugePages of the mappings within
 * [p, p+size) in /proc/self/smaps, in kB; -1 if it cannot be read. */
static long anon_huge_kb(char *p, unsigned long size)
{
	char line[256];
	unsigned long lo, hi;
	long kb, sum = 0;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = lo >= (unsigned long)p && hi <= (unsigned long)p + size;
		else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			sum += kb;
	}
	fclose(f);
	return sum;
}

/* kbox_lkl_prefault_check maps size bytes at a 2 MB boundary, prefaults
 * them as boot's memory is, and counts the pages resident at each end
 * (*ends) and in the rest (*middle), and the mapping's AnonHugePages in
 * kB (*huge), for lkl's tests. -1 if it cannot map. */
int kbox_lkl_prefault_check(unsigned long size, long *ends, long *middle, long *huge)
{
	char *raw = mmap(NULL, size + HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return -1;
	char *p = (char *)huge_up((unsigned long)raw);
	prefault(p, size);
	*huge = anon_huge_kb(p, size);
	unsigned long ps = (unsigned long)sysconf(_SC_PAGESIZE);
	unsigned long bottom = PREFAULT_BOTTOM, top = prefault_top(size);
	unsigned long pages = size / ps, lo = bottom / ps, hi = pages - top / ps;
	unsigned char *vec = malloc(pages);
	int r = vec != NULL && mincore(p, size, vec) == 0 ? 0 : -1;
	*ends = *middle = 0;
	for (unsigned long i = 0; r == 0 && i < pages; i++)
		if (vec[i] & 1)
			++*(i < lo || i >= hi ? ends : middle);
	free(vec);
	munmap(raw, size + HUGE_SIZE);
	return r;
}

/*
 * After boot and the mounts, the kernel's next first writes are its page
 * cache, inodes and dentries: a few hundred pages to start a guest,
 * several thousand for a command that reads a tree (find /usr, python's
 * imports), a fault each. The memory from 4 MB above the highest page
 * written by then, up to the top's end, asks for huge pages: a small
 * guest's start (a sleep: its program and loader read) takes pages within
 * those 4 MB, in small pages as before, so such an idle run has no more
 * memory (its first pages lie 2 to 4 MB above boot's: /proc/PID/pagemap),
 * and what a workload takes beyond comes in 2 MB pages, a fault each. A
 * guest that has gone beyond holds up to one partly used 2 MB page more
 * than small pages would be (a shell that read a 2 MB busybox: 2.3 MB).
 * Only where the memory is 2 MB aligned; a host without THP ignores it.
 */
#define HUGE_MARGIN (4UL << 20)

/* highest_written is the end of the highest page of [p, p+end) that is
 * resident, 0 if none, -1 if mincore fails: read downwards a few MB at a
 * time, where one call for the whole memory (and its vector's pages, new
 * at every run) cost 0.4 ms on a PVM guest, 0.1 this way. */
static long highest_written(char *p, unsigned long end)
{
	unsigned char vec[4096];
	unsigned long ps = (unsigned long)sysconf(_SC_PAGESIZE), step = sizeof vec * ps;

	for (unsigned long hi = end; hi > 0;) {
		unsigned long lo = hi > step ? hi - step : 0;
		if (mincore(p + lo, hi - lo, vec) != 0)
			return -1;
		for (unsigned long i = (hi - lo) / ps; i > 0; i--)
			if (vec[i - 1] & 1)
				return (long)(lo + i * ps);
		hi = lo;
	}
	return 0;
}

static long huge_rest(char *p, unsigned long size)
{
	unsigned long end = size - prefault_top(size);

	if (((unsigned long)p | size) % HUGE_SIZE != 0 || end <= HUGE_MARGIN)
		return -1;
	long hi = highest_written(p, end);
	if (hi < 0)
		return -1;
	unsigned long from = huge_up((unsigned long)hi) + HUGE_MARGIN;
	if (from >= end || madvise(p + from, end - from, MADV_HUGEPAGE) != 0)
		return -1;
	return (long)from;
}

/* Memory at 1 GiB ends below the rewrite tier's slot table
 * (rewrite.X86SlotBase, 0x7F060000): a kernel of a GiB or more goes to
 * the next candidate. */
#define LOW_CEILING 0x7F000000UL

static void *low_page_alloc(unsigned long size)
{
	static const unsigned long hints[] = { 1UL << 30, 4UL << 30, 16UL << 30, 64UL << 30 };

	if (low_mem == NULL && size >= (8UL << 20)) {
		for (unsigned i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
			if (hints[i] < LOW_CEILING && size > LOW_CEILING - hints[i])
				continue;
			void *p = mmap((void *)hints[i], size, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == MAP_FAILED)
				continue;
			if (p != (void *)hints[i]) { /* kernel without NOREPLACE: a mere hint */
				munmap(p, size);
				continue;
			}
			low_mem = p;
			low_size = size;
			prefault(p, size);
			return p;
		}
	}
	return orig_page_alloc(size);
}

static void low_page_free(void *addr, unsigned long size)
{
	if (addr != NULL && addr == low_mem) {
		munmap(addr, low_size);
		low_mem = NULL;
		return;
	}
	orig_page_free(addr, size);
}

long kbox_lkl_huge_rest(void)
{
	return low_mem == NULL ? -1 : huge_rest(low_mem, low_size);
}

/* kbox_lkl_huge_rest_check maps size bytes at a 2 MB boundary, prefaults
 * them as boot's memory is, writes a page at each offset of wrote[0..nw),
 * applies huge_rest, then writes a page at each offset of touch[0..nt),
 * and returns huge_rest's answer, with the mapping's AnonHugePages in kB
 * (*huge), for lkl's tests. -2 if it cannot map. */
long kbox_lkl_huge_rest_check(unsigned long size, const unsigned long *wrote, int nw,
			      const unsigned long *touch, int nt, long *huge)
{
	char *raw = mmap(NULL, size + HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return -2;
	char *p = (char *)huge_up((unsigned long)raw);
	prefault(p, size);
	for (int i = 0; i < nw; i++)
		p[wrote[i]] = 1;
	long from = huge_rest(p, size);
	for (int i = 0; i < nt; i++)
		p[touch[i]] = 1;
	*huge = anon_huge_kb(p, size);
	munmap(raw, size + HUGE_SIZE);
	return from;
}

void kbox_lkl_low_memory(void)
{
	if (lkl_host_ops.page_alloc == NULL || lkl_host_ops.page_free == NULL ||
	    lkl_host_ops.page_alloc == low_page_alloc)
		return;
	orig_page_alloc = lkl_host_ops.page_alloc;
	orig_page_free = lkl_host_ops.page_free;
	lkl_host_ops.page_alloc = low_page_alloc;
	lkl_host_ops.page_free = low_page_free;
}
