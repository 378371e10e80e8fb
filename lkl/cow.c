//go:build lkl

/* A copy-on-write disk for ephemeral runs (kbox image --ephemeral): reads
 * come from the base image unless the block was written, writes go to a
 * sparse overlay file at the same offset. The base is only read, so any
 * number of runs share it. Blocks are 4 KiB; a partial write of a block
 * not yet in the overlay first copies the block from the base. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <lkl.h>
#include <lkl_host.h>
#include "lkl_glue.h"

#define COW_BLOCK 4096ULL

struct kbox_cow {
	int base, over;
	unsigned long long size;
	unsigned char *dirty; /* one bit per block */
	pthread_mutex_t mu;
};

static int cow_capacity(struct lkl_disk disk, unsigned long long *res)
{
	*res = ((struct kbox_cow *)disk.handle)->size;
	return 0;
}

/* Read len bytes at off; what lies beyond the file's end reads as zeros. */
static int read_full(int fd, char *p, size_t len, unsigned long long off)
{
	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			memset(p, 0, len);
			return 0;
		}
		p += n;
		off += (unsigned long long)n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const char *p, size_t len, unsigned long long off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		off += (unsigned long long)n;
		len -= (size_t)n;
	}
	return 0;
}

static int cow_io(struct kbox_cow *c, int write, unsigned long long off, char *p, size_t len)
{
	static __thread char tmp[COW_BLOCK];

	if (off > c->size || len > c->size - off)
		return -1;
	while (len > 0) {
		unsigned long long blk = off / COW_BLOCK;
		size_t in = (size_t)(off % COW_BLOCK);
		size_t n = (size_t)COW_BLOCK - in;
		unsigned char bit = (unsigned char)(1u << (blk % 8));
		int dirty;

		if (n > len)
			n = len;
		dirty = c->dirty[blk / 8] & bit;
		if (!write) {
			if (read_full(dirty ? c->over : c->base, p, n, off) < 0)
				return -1;
		} else {
			/* The block as far as the disk goes: the overlay never
			 * grows past the base's size. */
			size_t blen = c->size - blk * COW_BLOCK < COW_BLOCK ?
				(size_t)(c->size - blk * COW_BLOCK) : (size_t)COW_BLOCK;

			if (!dirty && n != blen) {
				if (read_full(c->base, tmp, blen, blk * COW_BLOCK) < 0)
					return -1;
				memcpy(tmp + in, p, n);
				if (write_full(c->over, tmp, blen, blk * COW_BLOCK) < 0)
					return -1;
			} else if (write_full(c->over, p, n, off) < 0) {
				return -1;
			}
			c->dirty[blk / 8] |= bit;
		}
		off += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int cow_request(struct lkl_disk disk, struct lkl_blk_req *req)
{
	struct kbox_cow *c = disk.handle;
	unsigned long long off = req->sector * 512ULL;
	int i, err = 0;

	switch (req->type) {
	case LKL_DEV_BLK_TYPE_READ:
	case LKL_DEV_BLK_TYPE_WRITE:
		break;
	case LKL_DEV_BLK_TYPE_FLUSH:
	case LKL_DEV_BLK_TYPE_FLUSH_OUT:
		/* The overlay is thrown away or copied after unmount: nothing
		 * needs to reach the disk now. */
		return LKL_DEV_BLK_STATUS_OK;
	default:
		return LKL_DEV_BLK_STATUS_UNSUP;
	}
	pthread_mutex_lock(&c->mu);
	for (i = 0; i < req->count && !err; i++) {
		struct iovec *v = &req->buf[i];
		err = cow_io(c, req->type == LKL_DEV_BLK_TYPE_WRITE, off, v->iov_base, v->iov_len);
		off += v->iov_len;
	}
	pthread_mutex_unlock(&c->mu);
	return err ? LKL_DEV_BLK_STATUS_IOERR : LKL_DEV_BLK_STATUS_OK;
}

static struct lkl_dev_blk_ops cow_ops = {
	.get_capacity = cow_capacity,
	.request = cow_request,
};

/* dirty is the caller's bitmap, one bit per block, zeroed, at least
 * kbox_cow_map_len(size) bytes; it outlives the disk (the caller reads it
 * after the unmount to know which blocks the overlay holds). */
void *kbox_cow_new(int base, int over, unsigned long long size, unsigned char *dirty)
{
	struct kbox_cow *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->dirty = dirty;
	c->base = base;
	c->over = over;
	c->size = size;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

unsigned long long kbox_cow_map_len(unsigned long long size)
{
	return (size + COW_BLOCK * 8 - 1) / (COW_BLOCK * 8);
}

void kbox_cow_free(void *p)
{
	struct kbox_cow *c = p;

	if (!c)
		return;
	pthread_mutex_destroy(&c->mu);
	free(c);
}

int kbox_cow_is(const void *ops) { return ops == &cow_ops; }

void *kbox_cow_ops(void) { return &cow_ops; }
