/*
 * kbox's debug mirror: what the engine keeps in Go (processes, virtual fds,
 * shadow nodes, path resolutions), copied into plain C memory when the
 * debug flag is on, so that GDB reads it through C DWARF
 * (scripts/gdb/kbox-gdb.py). Layout version: KBOX_GDB_VERSION.
 */
#ifndef KBOX_GDB_MIRROR_H
#define KBOX_GDB_MIRROR_H

#include <stdint.h>

#define KBOX_GDB_VERSION 1
#define KBOX_GDB_PROCS 256
#define KBOX_GDB_FDS 4096
#define KBOX_GDB_SHADOWS 1024
#define KBOX_GDB_RESOLVED 64
#define KBOX_GDB_PATH 256
#define KBOX_GDB_SYSCALLS 512
#define KBOX_GDB_TEXT (256 * 1024)

/* kinds of a virtual fd */
enum kbox_gdb_kind {
	KBOX_GDB_LKL = 1,     /* an LKL fd */
	KBOX_GDB_HOST = 2,    /* a host fd kbox holds for the guest */
	KBOX_GDB_LISTING = 3, /* a directory listing kbox generates (/proc) */
};

/* kinds of a resolved path */
enum kbox_gdb_route {
	KBOX_GDB_IMAGE = 1,    /* the image, through LKL under its chroot */
	KBOX_GDB_ROUTE = 2,    /* a host route, openat2 RESOLVE_BENEATH its root */
	KBOX_GDB_BIND = 3,     /* a bind, confined beneath its host directory */
	KBOX_GDB_PROCNODE = 4, /* a /proc node kbox answers itself */
	KBOX_GDB_DEVFD = 5,    /* /dev/fd/N: the caller's own fd N */
};

struct kbox_gdb_proc {
	int32_t pid; /* host tgid of the guest process */
	int32_t nfds; /* its virtual fds */
	char cwd[KBOX_GDB_PATH];
	char exe[KBOX_GDB_PATH];
};

struct kbox_gdb_fd {
	int32_t pid; /* owner's tgid */
	int32_t fd; /* guest fd (virtual: >= the base) */
	int32_t kind; /* enum kbox_gdb_kind */
	int32_t lkl_fd; /* -1 if none */
	int32_t host_fd; /* kbox's host fd, -1 if none */
	int32_t flags; /* open flags */
	int32_t cloexec;
	char path[KBOX_GDB_PATH];
};

struct kbox_gdb_shadow {
	uint64_t host_dev, host_ino; /* the content file on the host */
	int32_t lkl_fd; /* the LKL fd of the image inode */
	char path[KBOX_GDB_PATH]; /* the guest path it was opened by */
};

struct kbox_gdb_resolved {
	uint64_t seq; /* 0: empty */
	int32_t pid, nr; /* caller and syscall */
	int32_t route; /* enum kbox_gdb_route */
	int32_t read_only; /* a read-only bind */
	char given[KBOX_GDB_PATH]; /* as the guest gave it */
	char abs[KBOX_GDB_PATH]; /* cleaned, absolute */
	char host[KBOX_GDB_PATH]; /* host directory it is confined beneath */
	char rel[KBOX_GDB_PATH]; /* the path beneath it */
};

struct kbox_gdb_mirror {
	int32_t version;
	int32_t vfd_base;
	/* seq is odd while the engine rewrites the tables below */
	uint64_t seq;
	int32_t nprocs, nfds, nshadows;
	struct kbox_gdb_proc procs[KBOX_GDB_PROCS];
	struct kbox_gdb_fd fds[KBOX_GDB_FDS];
	struct kbox_gdb_shadow shadows[KBOX_GDB_SHADOWS];
	uint64_t resolved_seq;
	struct kbox_gdb_resolved resolved[KBOX_GDB_RESOLVED];
	/* the engine's configuration: one route or bind a line */
	char config[8192];
	/* the kernel snapshot: LKL's own /proc, read by kbox on request
	 * (kernel_served: kbox answers requests) */
	int32_t kernel_served;
	uint64_t kernel_gen;
	char kernel[KBOX_GDB_TEXT];
	/* syscall names by number, for kbox-break-syscall */
	char sysnames[KBOX_GDB_SYSCALLS][24];
};

/* The engine's state, when kbox_gdb_enabled. */
extern struct kbox_gdb_mirror kbox_gdb;
/* The debug flag: KBOX_GDB=1 at start, or set by GDB. */
extern volatile int32_t kbox_gdb_enabled;
/* GDB sets it above kbox_gdb.kernel_gen to ask for a kernel snapshot. */
extern volatile uint64_t kbox_gdb_kernel_req;

void kbox_gdb_dispatch(int32_t pid, int32_t nr);
void kbox_gdb_dispatched(int32_t pid, int32_t nr, int64_t val, int32_t err);
void kbox_gdb_snapshot_done(uint64_t gen);

#endif
