/*
 * The content store's helper (shadowfd/store.go, startHelper): for a kbox
 * that may not mount (not root), the size-limited tmpfs mounts behind
 * shadows are made here, in a user and mount namespace of the helper's
 * own (uid 0 inside is kbox's uid), made by kbox as it starts the helper.
 * The helper is kbox's start-up program (or kbox re-executed) with
 * KBOX_STORE_HELPER=1: guestinit.c calls kbox_run_store before anything
 * else. It serves requests on fd 3, a seqpacket socket, until kbox's end
 * closes:
 *
 *   request: op (1 byte: 'M' mount, 'R' resize, 'P' devpts), id (u32), size (u64)
 *   reply:   errno (u32), id (u32); a mount's root fd rides along (SCM_RIGHTS)
 *
 * 'M' makes a tmpfs of size bytes (mode 0700, no huge pages, nosuid,
 * nodev) and answers its id and an fd of its root; 'R' resizes mount id;
 * 'P' makes a devpts instance (ptmxmode 0666, mode 0620, nosuid, noexec)
 * and answers its mount fd. shadowfd's directMounter makes the same
 * mounts in kbox's own process when kbox may.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "store.h"

/* linux/mount.h's values, spelled here: its header clashes with libcs'. */
#define FSOPEN_CLOEXEC 0x1
#define FSPICK_CLOEXEC 0x1
#define FSPICK_EMPTY_PATH 0x8
#define FSMOUNT_CLOEXEC 0x1
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
#define FSCONFIG_CMD_RECONFIGURE 7
#define MOUNT_ATTR_NOSUID 0x2
#define MOUNT_ATTR_NODEV 0x4
#define MOUNT_ATTR_NOEXEC 0x8

static int *mounts; /* mount fd by id (1, 2, ...); -1 once gone */
static unsigned nmounts;

static int set(int fs, const char *key, const char *value)
{
	return (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0);
}

/* make_mount makes a filesystem of type with the options kv (pairs, NULL
 * ended; a key starting with '?' may be refused) and returns its mount
 * fd, or -errno. */
static int make_mount(const char *type, const char *const *kv, unsigned attrs)
{
	int fs = (int)syscall(SYS_fsopen, type, FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	for (; kv[0] != NULL; kv += 2) {
		int optional = kv[0][0] == '?';
		if (set(fs, kv[0] + optional, kv[1]) != 0 && !optional) {
			int e = errno;
			close(fs);
			return -e;
		}
	}
	int mnt = -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
	int e = errno;
	close(fs);
	return mnt < 0 ? -e : mnt;
}

/* size_arg writes size in bytes, at least a page: size=0 is no limit. */
static void size_arg(char *buf, size_t len, uint64_t size)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	snprintf(buf, len, "%llu", (unsigned long long)(size < page ? page : size));
}

/* tmpfs_mount answers 'M': the root fd of a new tmpfs, *id its id. */
static int tmpfs_mount(uint64_t size, uint32_t *id)
{
	char sz[32];
	size_arg(sz, sizeof sz, size);
	const char *const kv[] = { "size", sz, "mode", "0700", "?huge", "never", NULL };
	int mnt = make_mount("tmpfs", kv, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return mnt;
	int dir = openat(mnt, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (dir < 0) {
		int e = errno;
		close(mnt);
		return -e;
	}
	int *grown = realloc(mounts, (nmounts + 1) * sizeof *mounts);
	if (grown == NULL) {
		close(dir);
		close(mnt);
		return -ENOMEM;
	}
	mounts = grown;
	mounts[nmounts++] = mnt;
	*id = nmounts;
	return dir;
}

/* resize answers 'R': mount id's size becomes size. */
static int resize(uint32_t id, uint64_t size)
{
	if (id == 0 || id > nmounts || mounts[id - 1] < 0)
		return -EBADF;
	int pick = (int)syscall(SYS_fspick, mounts[id - 1], "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);
	if (pick < 0)
		return -errno;
	char sz[32];
	size_arg(sz, sizeof sz, size);
	int r = set(pick, "size", sz) == 0 &&
			syscall(SYS_fsconfig, pick, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) == 0
		? 0
		: -errno;
	close(pick);
	return r;
}

static int reply(int sock, uint32_t err, uint32_t id, int fd)
{
	unsigned char rep[8];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { rep, sizeof rep };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	memcpy(rep, &err, 4);
	memcpy(rep + 4, &id, 4);
	if (fd >= 0) {
		memset(&ctl, 0, sizeof ctl);
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof ctl.buf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof rep ? 0 : -1;
}

int kbox_run_store(int sock)
{
	for (;;) {
		unsigned char req[13];
		ssize_t n = read(sock, req, sizeof req);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof req)
			return 0; /* kbox is gone */
		uint32_t id, out = 0;
		uint64_t size;
		memcpy(&id, req + 1, 4);
		memcpy(&size, req + 5, 8);
		int r, fd = -1;
		switch (req[0]) {
		case 'M':
			r = fd = tmpfs_mount(size, &out);
			break;
		case 'R':
			r = resize(id, size);
			break;
		case 'P': {
			const char *const kv[] = { "ptmxmode", "0666", "mode", "0620", NULL };
			r = fd = make_mount("devpts", kv, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
			break;
		}
		default:
			r = -EINVAL;
		}
		int sent = reply(sock, r < 0 ? (uint32_t)-r : 0, out, fd);
		if (fd >= 0)
			close(fd);
		if (sent != 0)
			return 0;
	}
}
