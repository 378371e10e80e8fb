//go:build lkl

/* A copy-on-write disk (kbox image --ephemeral, --overlay; sessions): the
 * base image and a stack of layers over it. Every layer is a sparse file
 * holding the blocks it has at their offsets in the image; only the top
 * one is written, and a block reads from the topmost layer that has it
 * (a per-block index of that layer, so a read costs the same whatever the
 * stack's height). The base is only read, so any number of runs share it.
 * Blocks are 4 KiB; a partial write of a block not yet in the top layer
 * first copies the block from the layer that has it. Pushing a new, empty
 * top layer seals the one below: a session's checkpoint, copying nothing. */
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

#define COW_MAX_LAYERS 65535 /* an index entry is 16 bits; 0 is the base */

struct kbox_cow {
	int *fds; /* fds[0] the base, fds[top] the written layer */
	unsigned int top, cap;
	unsigned short *idx; /* per block: the topmost layer that has it */
	unsigned long long size;
	unsigned char *dirty; /* the top layer's blocks, one bit each (the caller's) */
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
	int over = c->fds[c->top];

	if (off > c->size || len > c->size - off)
		return -1;
	while (len > 0) {
		unsigned long long blk = off / COW_BLOCK;
		size_t in = (size_t)(off % COW_BLOCK);
		size_t n = (size_t)COW_BLOCK - in;
		unsigned int at = c->idx[blk];

		if (n > len)
			n = len;
		if (!write) {
			if (read_full(c->fds[at], p, n, off) < 0)
				return -1;
		} else {
			/* The block as far as the disk goes: a layer never
			 * grows past the base's size. */
			size_t blen = c->size - blk * COW_BLOCK < COW_BLOCK ?
				(size_t)(c->size - blk * COW_BLOCK) : (size_t)COW_BLOCK;

			if (at != c->top && n != blen) {
				if (read_full(c->fds[at], tmp, blen, blk * COW_BLOCK) < 0)
					return -1;
				memcpy(tmp + in, p, n);
				if (write_full(over, tmp, blen, blk * COW_BLOCK) < 0)
					return -1;
			} else if (write_full(over, p, n, off) < 0) {
				return -1;
			}
			c->idx[blk] = (unsigned short)c->top;
			c->dirty[blk / 8] |= (unsigned char)(1u << (blk % 8));
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
		/* The layers are thrown away or synced after the kernel
		 * halts: nothing needs to reach the disk now. */
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

/* A disk of size bytes over the base alone; kbox_cow_push gives it its
 * layers, the last one pushed being written. */
void *kbox_cow_new(int base, unsigned long long size)
{
	struct kbox_cow *c = calloc(1, sizeof(*c));
	unsigned long long nblk = (size + COW_BLOCK - 1) / COW_BLOCK;

	if (!c)
		return NULL;
	c->cap = 4;
	c->fds = calloc(c->cap, sizeof(int));
	c->idx = calloc(nblk ? nblk : 1, sizeof(unsigned short));
	if (!c->fds || !c->idx) {
		free(c->fds);
		free(c->idx);
		free(c);
		return NULL;
	}
	c->fds[0] = base;
	c->size = size;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

/* Puts the layer fd on top: the blocks set in map (the caller's, at least
 * kbox_cow_map_len(size) bytes) are read from it from now on, and writes
 * go to it, each setting its block's bit in map. The layer below is
 * sealed: nothing writes it again, and its map is the caller's to free.
 * fd must stay open while the disk lives. 0, or -ENOMEM, -EMLINK. */
int kbox_cow_push(void *p, int fd, unsigned char *map)
{
	struct kbox_cow *c = p;
	unsigned long long nblk = (c->size + COW_BLOCK - 1) / COW_BLOCK, blk;
	int err = 0;

	pthread_mutex_lock(&c->mu);
	if (c->top + 1 > COW_MAX_LAYERS) {
		err = -31; /* EMLINK */
		goto out;
	}
	if (c->top + 1 >= c->cap) {
		int *fds = realloc(c->fds, 2 * c->cap * sizeof(int));

		if (!fds) {
			err = -12; /* ENOMEM */
			goto out;
		}
		c->fds = fds;
		c->cap *= 2;
	}
	c->fds[++c->top] = fd;
	c->dirty = map;
	for (blk = 0; blk < nblk; blk += 8) {
		unsigned char b = map[blk / 8];
		unsigned long long i;

		for (i = blk; b && i < nblk; i++, b >>= 1)
			if (b & 1)
				c->idx[i] = (unsigned short)c->top;
	}
out:
	pthread_mutex_unlock(&c->mu);
	return err;
}

/* Where the bytes at off are: the fd of the layer that holds off's block
 * (the base's for a block no layer has), and in *run how many of the len
 * bytes from off lie in blocks held by that same layer, at the same
 * offsets in its file. A reader of a file whose blocks nothing writes (a
 * file unchanged since the mount) may copy them from there: the layers'
 * fds stay open while the disk lives, and a block only moves up (to the
 * top layer, by a write to it). -1 if off..off+len is not on the disk. */
int kbox_cow_run(void *p, unsigned long long off, unsigned long long len, unsigned long long *run)
{
	struct kbox_cow *c = p;
	unsigned long long blk, end;
	unsigned short at;
	int fd;

	if (len == 0 || off >= c->size || len > c->size - off)
		return -1;
	pthread_mutex_lock(&c->mu);
	blk = off / COW_BLOCK;
	at = c->idx[blk];
	fd = c->fds[at];
	end = (blk + 1) * COW_BLOCK;
	while (end < off + len && c->idx[end / COW_BLOCK] == at)
		end += COW_BLOCK;
	pthread_mutex_unlock(&c->mu);
	*run = (end < off + len ? end : off + len) - off;
	return fd;
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
	free(c->fds);
	free(c->idx);
	free(c);
}

unsigned int kbox_cow_layers(const void *p) { return ((const struct kbox_cow *)p)->top; }

int kbox_cow_is(const void *ops) { return ops == &cow_ops; }

void *kbox_cow_ops(void) { return &cow_ops; }
