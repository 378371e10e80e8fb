/* kbox glue over liblkl: the only C that touches LKL. */
#ifndef KBOX_LKL_GLUE_H
#define KBOX_LKL_GLUE_H

#include <stdint.h>

int kbox_lkl_api_generation(void);
int kbox_lkl_boot(const char *cmdline);
void kbox_lkl_low_memory(void);
int kbox_lkl_prefault_check(unsigned long size, long *ends, long *middle, long *huge);
long kbox_lkl_huge_rest(void);
long kbox_lkl_huge_rest_check(unsigned long size, const unsigned long *wrote, int nw,
			      const unsigned long *touch, int nt, long *huge);
void kbox_lkl_own_timer(void);
void kbox_lkl_own_sync(void);
int kbox_lkl_sync_spins(void);
void kbox_lkl_hurry(unsigned long ns);
void kbox_lkl_console(int echo);
void kbox_lkl_starting(int on);
void kbox_lkl_restarted(void);
void kbox_lkl_panic(void);
void kbox_lkl_shutdown(void);
int kbox_lkl_disk_add(int fd);
int kbox_lkl_disk_remove(int id);
int kbox_lkl_disk_add_cow(void *cow);
int kbox_lkl_disk_push_cow(int id, int fd, unsigned char *map);
void *kbox_cow_new(int base, unsigned long long size);
int kbox_cow_push(void *cow, int fd, unsigned char *map);
unsigned int kbox_cow_layers(const void *cow);
unsigned long long kbox_cow_map_len(unsigned long long size);
void kbox_cow_free(void *cow);
int kbox_cow_is(const void *ops);
int kbox_cow_run(void *cow, unsigned long long off, unsigned long long len, unsigned long long *run);
int kbox_lkl_disk_cow_run(int id, unsigned long long off, unsigned long long len, unsigned long long *run);
void *kbox_cow_ops(void);
int kbox_lkl_disk_add_faulty(int fd, const unsigned long long *ranges, int n);
unsigned long long kbox_lkl_disk_failed(int id);
void *kbox_faulty_new(int fd, const unsigned long long *ranges, int n);
void kbox_faulty_free(void *f);
unsigned long long kbox_faulty_failed(void *f);
int kbox_faulty_is(const void *ops);
void *kbox_faulty_ops(void);
int kbox_lkl_blkdev(unsigned int disk_id, unsigned int part, unsigned int *dev);
long kbox_lkl_umount_dev(unsigned int disk_id, unsigned int part, int flags, long timeout_ms);
long kbox_lkl_mount_dev(unsigned int disk_id, unsigned int part, const char *fstype,
			int flags, const char *opts, char *out, unsigned int outlen);
long kbox_lkl_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6);

/* Credentials of the calling thread's LKL calls (cred.c). */
long kbox_cred_sync(void);
int kbox_cred_want(unsigned long long id, unsigned int fsuid, unsigned int fsgid, unsigned long long cap,
		   unsigned int ngroups, const unsigned int *groups);
void kbox_cred_root_begin(void);
void kbox_cred_root_end(void);
unsigned long long kbox_cred_applied(void);
unsigned long long *kbox_cred_slot(void);

/* The network device (netdev.c). */
void *kbox_netdev_new(void);
int kbox_netdev_add(void *dev, const unsigned char *mac);
int kbox_netdev_ifindex(int id);
int kbox_netdev_tryread(void *dev, unsigned char *buf, int cap);
int kbox_netdev_efd(void *dev);
int kbox_netdev_write(void *dev, const unsigned char *frame, int len);
int kbox_netdev_direct(void *dev);
void kbox_netdev_stats(void *dev, unsigned long long *out);
void kbox_netdev_hup(void *dev);
uint64_t *kbox_net_gen_ptr(void);
int kbox_net_if_up(int ifindex);
int kbox_net_if_set_mtu(int ifindex, int mtu);
int kbox_net_if_set_ipv4(int ifindex, unsigned int addr, unsigned int plen);
int kbox_net_set_ipv4_gateway(unsigned int addr);

#endif
