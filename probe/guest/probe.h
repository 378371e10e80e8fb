/*
 * probe.h: what the parts of kbox-probe share (kbox-probe.c: the
 * parameters, the output, the probes of paths, processes and devices;
 * host.c: the probes of the network, privilege, limits, the kernel's
 * surface and the in-process tiers).
 */
#ifndef KBOX_PROBE_H
#define KBOX_PROBE_H
#include <stddef.h>

/* An outcome: allowed or denied, the errno that decided it, a detail. */
struct res {
	const char *observed;
	int err;
	char detail[200];
};

struct res mk(const char *obs, int err, const char *fmt, ...);
#define ALLOWED(...) mk("allowed", 0, __VA_ARGS__)
#define DENIED(e, ...) mk("denied", (e), __VA_ARGS__)
#define SKIPPED(...) mk("skipped", 0, __VA_ARGS__)

/* The parameters kbox passes (KEY=VALUE). */
extern const char *p_token, *p_marker, *p_hidden, *p_ro, *p_bind, *p_rwbind;
extern long p_kbox, p_parent, p_port, p_fsize, p_procs, p_quota_nr, p_quota_n, p_quota_errno;
extern char **probe_argv;
const char *param(const char *key);
long lparam(const char *key);
const char *errname(int e);

int readfile(const char *path, char *buf, size_t n);
struct res read_marker(const char *path);
struct res open_read(const char *path);

/* host.c */
struct res inproc_gadget(void);
struct res limit_fsize(void);
struct res limit_image_writes(void);
struct res limit_procs(void);
struct res limit_quota(void);
struct res net_host(void);
struct res net_loopback(void);
struct res net_metadata(void);
struct res net_outside(void);
struct res setuid_host(void);
struct res sys_bpf(void);
struct res sys_io_uring(void);
struct res sys_keyctl(void);
struct res sys_mount(void);
struct res sys_perf(void);
struct res sys_unshare(void);
struct res sys_clonens(void);
int suid_child(void);

#endif
