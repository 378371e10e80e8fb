//go:build lkl

/* A disk for tests only (KBOX_TEST_DISK_EIO, docs/testing.md): the image's
 * host fd, read and written like LKL's own file disk, except that every
 * request touching one of a few ranges of 512-byte sectors fails with an
 * I/O error, as a failing drive would: reads, writes or both (ops bit 1
 * reads, bit 2 writes). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <lkl.h>
#include <lkl_host.h>
#include "lkl_glue.h"

struct kbox_faulty {
	int fd;
	unsigned long long size;
	int nranges;
	unsigned long long *ranges; /* first, last sector (inclusive), ops */
	unsigned long long failed;  /* requests answered with an error */
};

static int faulty_capacity(struct lkl_disk disk, unsigned long long *res)
{
	*res = ((struct kbox_faulty *)disk.handle)->size;
	return 0;
}

static int faulty_hits(struct kbox_faulty *f, unsigned long long op, unsigned long long first,
		       unsigned long long last)
{
	int i;

	for (i = 0; i < f->nranges; i++) {
		unsigned long long *r = &f->ranges[3 * i];

		if ((r[2] & op) && first <= r[1] && last >= r[0])
			return 1;
	}
	return 0;
}

static int faulty_io(int fd, int write, unsigned long long off, char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write ? pwrite(fd, p, len, (off_t)off) : pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n == 0 && write))
			return -1;
		if (n == 0) { /* beyond the file's end: zeros */
			memset(p, 0, len);
			return 0;
		}
		p += n;
		off += (unsigned long long)n;
		len -= (size_t)n;
	}
	return 0;
}

static int faulty_request(struct lkl_disk disk, struct lkl_blk_req *req)
{
	struct kbox_faulty *f = disk.handle;
	unsigned long long off = req->sector * 512ULL, len = 0;
	int i, write;

	switch (req->type) {
	case LKL_DEV_BLK_TYPE_READ:
	case LKL_DEV_BLK_TYPE_WRITE:
		break;
	case LKL_DEV_BLK_TYPE_FLUSH:
	case LKL_DEV_BLK_TYPE_FLUSH_OUT:
		return fdatasync(f->fd) < 0 ? LKL_DEV_BLK_STATUS_IOERR : LKL_DEV_BLK_STATUS_OK;
	default:
		return LKL_DEV_BLK_STATUS_UNSUP;
	}
	write = req->type == LKL_DEV_BLK_TYPE_WRITE;
	for (i = 0; i < req->count; i++)
		len += req->buf[i].iov_len;
	if (len > 0 && faulty_hits(f, write ? 2 : 1, req->sector, req->sector + (len - 1) / 512)) {
		__atomic_add_fetch(&f->failed, 1, __ATOMIC_RELAXED);
		return LKL_DEV_BLK_STATUS_IOERR;
	}
	for (i = 0; i < req->count; i++) {
		struct iovec *v = &req->buf[i];

		if (faulty_io(f->fd, write, off, v->iov_base, v->iov_len) < 0)
			return LKL_DEV_BLK_STATUS_IOERR;
		off += v->iov_len;
	}
	return LKL_DEV_BLK_STATUS_OK;
}

static struct lkl_dev_blk_ops faulty_ops = {
	.get_capacity = faulty_capacity,
	.request = faulty_request,
};

/* ranges holds n triples (first, last sector, ops); it is copied. */
void *kbox_faulty_new(int fd, const unsigned long long *ranges, int n)
{
	struct kbox_faulty *f;
	struct stat st;

	if (n < 0 || fstat(fd, &st) < 0)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->ranges = calloc((size_t)n + 1, 3 * sizeof(*f->ranges));
	if (!f->ranges) {
		free(f);
		return NULL;
	}
	memcpy(f->ranges, ranges, (size_t)n * 3 * sizeof(*f->ranges));
	f->nranges = n;
	f->fd = fd;
	f->size = (unsigned long long)st.st_size & ~511ULL;
	return f;
}

void kbox_faulty_free(void *p)
{
	struct kbox_faulty *f = p;

	if (!f)
		return;
	free(f->ranges);
	free(f);
}

unsigned long long kbox_faulty_failed(void *p)
{
	return p ? __atomic_load_n(&((struct kbox_faulty *)p)->failed, __ATOMIC_RELAXED) : 0;
}

int kbox_faulty_is(const void *ops) { return ops == &faulty_ops; }

void *kbox_faulty_ops(void) { return &faulty_ops; }
