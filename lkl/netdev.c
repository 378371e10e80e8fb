//go:build lkl

/*
 * kbox's network device: an LKL virtio-net device whose frames go to and
 * come from two rings in kbox's memory, never through a host fd.
 *
 * Each ring has one producer and one consumer, so it is lock-free: the
 * producer writes a record and then publishes the new head; the consumer
 * reads the record and then publishes the new tail. LKL's poll thread
 * (rx ring empty) and kbox's writer (rx ring full) wait on a futex word
 * that the other side bumps and wakes; kbox's reader (tx ring empty)
 * waits in Go's netpoller on an eventfd that LKL's tx writes only when
 * the reader said it waits. Waking is a syscall that never blocks.
 *
 *   tx ring: LKL's tx callback (interrupt context, serialised by the
 *            virtqueue's lock) produces; kbox's Go reader consumes. tx
 *            never blocks and never calls LKL or Go: when the ring is full
 *            it returns -1, and LKL retries the request when poll reports
 *            TX (after the reader made room).
 *   rx ring: kbox's Go writer produces, and consumes itself through
 *            LKL's virtio_process_queue ("Direct delivery", below);
 *            what the driver has no buffers for yet, LKL's poll thread
 *            consumes (poll waits, rx copies one frame out).
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <lkl.h>
#include <lkl_host.h>
#include <lkl/linux/virtio_net.h>
#include "lkl_glue.h"

/*
 * Each ring is a byte ring of variable-sized records (an 8-byte header
 * holding the frame's length, then the frame, padded to 8 bytes), so a
 * frame of the large MTU (up to 64 KiB) and a 60-byte ACK each take what
 * they need. head and tail are free-running byte positions (mod 2^32; the
 * ring's size divides 2^32). A record never wraps: when it does not fit
 * before the ring's end, a WRAP header fills the rest and the record
 * starts at 0; both are published by one store of head.
 */
#define RING_BYTES (4u << 20)	/* power of two */
#define REC_HDR 8u
#define WRAP 0xffffffffu
#define MAX_FRAME (64u << 10)	/* largest frame carried (MTU + 14 fits) */

struct ring {
	_Atomic uint32_t head;	/* next byte to write (producer) */
	_Atomic uint32_t tail;	/* next byte to read (consumer) */
	_Atomic uint32_t seq;	/* bumped on every change; futex word */
	unsigned char data[RING_BYTES];
};

/* Offloads offered to LKL's virtio-net driver (see docs/networking.md,
 * "The device"): checksums are not computed for the in-memory link in
 * either direction, and GUEST_TSO4/6 make the driver post 64 KiB receive
 * buffers, which the large MTU needs (kbox never sends GSO frames). */
#define NET_OFFLOADS ((1u << LKL_VIRTIO_NET_F_CSUM) | (1u << LKL_VIRTIO_NET_F_GUEST_CSUM) | \
		      (1u << LKL_VIRTIO_NET_F_GUEST_TSO4) | (1u << LKL_VIRTIO_NET_F_GUEST_TSO6))

struct kbox_netdev {
	struct lkl_netdev nd;	/* first: LKL passes &nd back */
	struct ring tx, rx;
	/* rx.seq wakes LKL's poll thread (frames for it, room in tx);
	 * rx_room wakes kbox's writer waiting for room in rx, and is only
	 * woken when wr_waiting says the writer waits: rx is called for
	 * every frame, and a wake-up nobody needs is a syscall. */
	_Atomic uint32_t rx_room;
	_Atomic int wr_waiting;
	/* LKL's virtio device behind nd, when liblkl has the symbols to
	 * process its queue from kbox's writer ("Direct delivery", below). */
	void *vdev;
	_Atomic int tx_full;	/* tx refused a frame: poll must report TX */
	_Atomic int hup;
	/* kbox's reader waits for the tx ring in Go's netpoller on efd (an
	 * eventfd), not in a cgo call: a thread blocked in cgo keeps its Go
	 * P until the runtime's monitor takes it back. rd_waiting says it
	 * is about to wait: the producer then writes efd. */
	int efd;
	_Atomic int rd_waiting;
	/* The poll thread delivered frames (the writer could not: the
	 * driver had no buffers): its next poll wakes the reader, whose
	 * next idle moment is when kbox looks at the sockets (usernet's
	 * AfterFrames). Only the poll thread uses it. */
	int poll_delivered;
	_Atomic uint64_t tx_frames, tx_drops, rx_frames, rx_drops;
};

static void wake(_Atomic uint32_t *w)
{
	atomic_fetch_add(w, 1);
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static void wait_change(_Atomic uint32_t *w, uint32_t seen, long timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (timeout_ms % 1000) * 1000000 };
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, seen, timeout_ms >= 0 ? &ts : NULL, NULL, 0);
}

static int ring_empty(struct ring *r)
{
	return atomic_load_explicit(&r->head, memory_order_acquire) ==
	       atomic_load_explicit(&r->tail, memory_order_acquire);
}

static uint32_t rec_bytes(size_t len)
{
	return REC_HDR + (((uint32_t)len + 7u) & ~7u);
}

/* ring_room says whether a record of len bytes fits now. */
static int ring_room(struct ring *r, size_t len)
{
	uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
	uint32_t off = h % RING_BYTES, need = rec_bytes(len);
	if (need > RING_BYTES - off)
		need += RING_BYTES - off;
	return h - t + need <= RING_BYTES;
}

/* ring_full: no room for a frame of the largest size. */
static int ring_full(struct ring *r)
{
	return !ring_room(r, MAX_FRAME);
}

/* push copies one frame from iov into r; its length, -1 when the ring
 * has no room, -2 when the frame is larger than any frame can be. The
 * caller wakes the consumer. */
static int push_iov(struct ring *r, const struct iovec *iov, int cnt)
{
	size_t len = 0;
	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	if (len > MAX_FRAME)
		return -2;
	if (!ring_room(r, len))
		return -1;
	uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t off = h % RING_BYTES, adv = rec_bytes(len);
	if (adv > RING_BYTES - off) {
		*(uint32_t *)(r->data + off) = WRAP;
		adv += RING_BYTES - off;
		off = 0;
	}
	*(uint32_t *)(r->data + off) = (uint32_t)len;
	unsigned char *p = r->data + off + REC_HDR;
	for (int i = 0; i < cnt; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	atomic_store_explicit(&r->head, h + adv, memory_order_release);
	return (int)len;
}

/* peek finds the next record of a non-empty ring: its data and length;
 * it returns the tail after the record. */
static uint32_t peek(struct ring *r, uint32_t t, unsigned char **p, size_t *len)
{
	uint32_t off = t % RING_BYTES;
	uint32_t n = *(uint32_t *)(r->data + off);
	if (n == WRAP) {
		t += RING_BYTES - off;
		off = 0;
		n = *(uint32_t *)(r->data);
	}
	*p = r->data + off + REC_HDR;
	*len = n;
	return t + rec_bytes(n);
}

/*
 * kbox_net_gen counts frames handed to LKL's driver: bumped by kbox's
 * writer before each delivery, and by the poll thread for each frame it
 * delivers (the writer's own are in its count already: in_direct). kbox's
 * readiness sweeps read it to tell what a sweep found first from what it
 * found late (dispatch/inetready.go).
 */
static _Atomic uint64_t kbox_net_gen;
static __thread int in_direct;

uint64_t *kbox_net_gen_ptr(void) { return (uint64_t *)&kbox_net_gen; }

static struct kbox_netdev *dev_of(struct lkl_netdev *nd)
{
	return (struct kbox_netdev *)nd;
}

/* notify_reader wakes kbox's reader if it waits: a write to an eventfd,
 * which never blocks (non-blocking fd; the counter cannot overflow). */
static void notify_reader(struct kbox_netdev *d)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&d->rd_waiting) && atomic_exchange(&d->rd_waiting, 0)) {
		uint64_t one = 1;
		ssize_t r = write(d->efd, &one, sizeof(one));
		(void)r;
	}
}

/* LKL -> kbox. Interrupt context: no blocking, no LKL, no Go. */
static int nd_tx(struct lkl_netdev *nd, struct iovec *iov, int cnt)
{
	struct kbox_netdev *d = dev_of(nd);
	int n = push_iov(&d->tx, iov, cnt);
	if (n == -2) {	/* larger than any frame of our MTU: dropped */
		atomic_fetch_add(&d->tx_drops, 1);
		size_t len = 0;
		for (int i = 0; i < cnt; i++)
			len += iov[i].iov_len;
		return (int)len;
	}
	if (n < 0) {
		atomic_store(&d->tx_full, 1);
		return -1;
	}
	atomic_fetch_add(&d->tx_frames, 1);
	notify_reader(d);
	return n;
}

/* kbox -> LKL, on LKL's poll thread after poll reported RX. */
static int nd_rx(struct lkl_netdev *nd, struct iovec *iov, int cnt)
{
	struct ring *r = &dev_of(nd)->rx;
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	if (t == atomic_load_explicit(&r->head, memory_order_acquire))
		return -1;
	unsigned char *p;
	size_t n, off = 0;
	uint32_t next = peek(r, t, &p, &n);
	for (int i = 0; i < cnt && off < n; i++) {
		size_t c = iov[i].iov_len;
		if (c > n - off)
			c = n - off;
		memcpy(iov[i].iov_base, p + off, c);
		off += c;
	}
	atomic_store_explicit(&r->tail, next, memory_order_release);
	if (!in_direct)
		atomic_fetch_add(&kbox_net_gen, 1);
	struct kbox_netdev *d = dev_of(nd);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&d->wr_waiting))
		wake(&d->rx_room);
	return (int)off;
}

static int nd_poll(struct lkl_netdev *nd)
{
	struct kbox_netdev *d = dev_of(nd);
	if (d->poll_delivered) {
		d->poll_delivered = 0;
		notify_reader(d);
	}
	for (;;) {
		uint32_t rs = atomic_load(&d->rx.seq), ts = atomic_load(&d->tx.seq);
		int ev = 0;
		if (atomic_load(&d->hup))
			return LKL_DEV_NET_POLL_HUP;
		if (!ring_empty(&d->rx))
			ev |= LKL_DEV_NET_POLL_RX;
		if (atomic_load(&d->tx_full) && !ring_full(&d->tx)) {
			atomic_store(&d->tx_full, 0);
			ev |= LKL_DEV_NET_POLL_TX;
		}
		if (ev & LKL_DEV_NET_POLL_RX)
			d->poll_delivered = 1;
		if (ev)
			return ev;
		/* Wait for the rx ring to change; a tx ring that gains room
		 * is noticed within the timeout (the Go reader bumps rx.seq
		 * too when tx was full, see kbox_netdev_tryread). */
		(void)ts;
		wait_change(&d->rx.seq, rs, 100);
	}
}

static void nd_poll_hup(struct lkl_netdev *nd)
{
	struct kbox_netdev *d = dev_of(nd);
	atomic_store(&d->hup, 1);
	wake(&d->rx.seq);
	atomic_store(&d->rd_waiting, 1);
	notify_reader(d);
}

static void nd_free(struct lkl_netdev *nd)
{
	(void)nd; /* kbox's device lives as long as the process */
}

static struct lkl_dev_net_ops kbox_net_ops = {
	.tx = nd_tx,
	.rx = nd_rx,
	.poll = nd_poll,
	.poll_hup = nd_poll_hup,
	.free = nd_free,
};

void *kbox_netdev_new(void)
{
	struct kbox_netdev *d = calloc(1, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->efd < 0) {
		free(d);
		return NULL;
	}
	d->nd.ops = &kbox_net_ops;
	return d;
}

/*
 * Direct delivery. LKL's virtio library (tools/lkl/lib, linked in
 * liblkl.a but not its public API) keeps each net device in
 * registered_devs[id] (a struct whose first member is its struct
 * virtio_dev) and exports virtio_process_queue, which LKL's poll thread
 * calls to fill the driver's receive buffers (through rx) and raise the
 * device's interrupt; the queue's own lock serialises callers. kbox's
 * writer calls it itself after queueing a frame, so the frame reaches
 * LKL's TCP on the writer's thread instead of waking the poll thread
 * first (a host thread woken and put to sleep again for each burst of
 * frames). Weak: a liblkl without them keeps the poll thread's
 * delivery.
 */
struct virtio_dev;
extern void virtio_process_queue(struct virtio_dev *dev, uint32_t qidx) __attribute__((weak));
extern void *registered_devs[] __attribute__((weak));
#define RX_QUEUE 0
#define VIRTIO_ID_NET 1

int kbox_netdev_add(void *dev, const unsigned char *mac)
{
	struct kbox_netdev *d = dev;
	struct lkl_netdev_args args;
	unsigned char m[6];
	memcpy(m, mac, 6);
	memset(&args, 0, sizeof(args));
	args.mac = m;
	args.offload = NET_OFFLOADS;
	int id = lkl_netdev_add(&d->nd, &args);
	if (id >= 0 && virtio_process_queue != NULL && registered_devs != NULL &&
	    getenv("KBOX_NET_POLL_RX") == NULL) {
		/* struct virtio_dev starts with its device id. */
		void *v = registered_devs[id];
		if (v != NULL && *(uint32_t *)v == VIRTIO_ID_NET)
			d->vdev = v;
	}
	return id;
}

int kbox_netdev_direct(void *dev) { return ((struct kbox_netdev *)dev)->vdev != NULL; }

int kbox_netdev_ifindex(int id) { return lkl_netdev_get_ifindex(id); }

int kbox_netdev_efd(void *dev) { return ((struct kbox_netdev *)dev)->efd; }

/*
 * kbox_netdev_tryread copies the next frame LKL sent into buf (up to cap
 * bytes) without waiting: its length, -1 once the device is hung up, or
 * 0 when there is none; then the reader is marked waiting, and the next
 * frame writes the eventfd (kbox_netdev_efd).
 */
int kbox_netdev_tryread(void *dev, unsigned char *buf, int cap)
{
	struct kbox_netdev *d = dev;
	struct ring *r = &d->tx;
	for (int armed = 0;; armed = 1) {
		uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
		if (t != atomic_load_explicit(&r->head, memory_order_acquire)) {
			unsigned char *p;
			size_t len;
			uint32_t next = peek(r, t, &p, &len);
			int n = len > (size_t)cap ? cap : (int)len;
			memcpy(buf, p, n);
			atomic_store_explicit(&r->tail, next, memory_order_release);
			if (atomic_load(&d->tx_full))
				wake(&d->rx.seq); /* LKL's poll: room in tx */
			return n;
		}
		if (atomic_load(&d->hup))
			return -1;
		if (armed)
			return 0;
		/* Mark waiting, then look again: a frame pushed before the
		 * mark is seen here, one pushed after it writes the eventfd. */
		atomic_store(&d->rd_waiting, 1);
		atomic_thread_fence(memory_order_seq_cst);
	}
}

/*
 * kbox_netdev_write queues one frame for LKL: its length, or -1 when the
 * ring stayed full (the frame is dropped, as a full NIC queue drops).
 */
int kbox_netdev_write(void *dev, const unsigned char *frame, int len)
{
	struct kbox_netdev *d = dev;
	struct iovec iov = { (void *)frame, (size_t)len };
	int n;
	/* A full ring first waits for LKL to take frames (rx bumps
	 * rx_room), up to about 100 ms: kbox's writer is no interrupt
	 * context. */
	for (int tries = 0;; tries++) {
		uint32_t seen = atomic_load(&d->rx_room);
		n = push_iov(&d->rx, &iov, 1);
		if (n != -1 || tries == 10 || atomic_load(&d->hup))
			break;
		wake(&d->rx.seq); /* the poll thread takes what it can */
		atomic_store(&d->wr_waiting, 1);
		atomic_thread_fence(memory_order_seq_cst);
		if (ring_room(&d->rx, (size_t)len)) {
			atomic_store(&d->wr_waiting, 0);
			continue;
		}
		wait_change(&d->rx_room, seen, 10);
		atomic_store(&d->wr_waiting, 0);
	}
	if (n < 0) {
		atomic_fetch_add(&d->rx_drops, 1);
		return -1;
	}
	atomic_fetch_add(&d->rx_frames, 1);
	atomic_fetch_add(&kbox_net_gen, 1);
	if (d->vdev != NULL && !atomic_load(&d->hup)) {
		in_direct = 1;
		virtio_process_queue(d->vdev, RX_QUEUE);
		in_direct = 0;
		/* What the driver had no buffers for waits for the poll
		 * thread, as before. */
		if (ring_empty(&d->rx))
			return n;
	}
	wake(&d->rx.seq); /* LKL's poll thread */
	return n;
}

void kbox_netdev_stats(void *dev, unsigned long long *out)
{
	struct kbox_netdev *d = dev;
	out[0] = atomic_load(&d->tx_frames);
	out[1] = atomic_load(&d->tx_drops);
	out[2] = atomic_load(&d->rx_frames);
	out[3] = atomic_load(&d->rx_drops);
}

void kbox_netdev_hup(void *dev) { nd_poll_hup(&((struct kbox_netdev *)dev)->nd); }

int kbox_net_if_up(int ifindex) { return lkl_if_up(ifindex); }

int kbox_net_if_set_mtu(int ifindex, int mtu) { return lkl_if_set_mtu(ifindex, mtu); }

int kbox_net_if_set_ipv4(int ifindex, unsigned int addr, unsigned int plen)
{
	return lkl_if_set_ipv4(ifindex, addr, plen);
}

int kbox_net_set_ipv4_gateway(unsigned int addr) { return lkl_set_ipv4_gateway(addr); }
