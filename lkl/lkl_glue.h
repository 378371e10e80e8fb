/* kbox glue over liblkl: the only C that touches LKL. */
#ifndef KBOX_LKL_GLUE_H
#define KBOX_LKL_GLUE_H

int kbox_lkl_api_generation(void);
int kbox_lkl_boot(const char *cmdline);
void kbox_lkl_low_memory(void);
void kbox_lkl_shutdown(void);
int kbox_lkl_disk_add(int fd);
int kbox_lkl_disk_remove(int id);
int kbox_lkl_disk_add_cow(int base, int over, unsigned long long size, unsigned char *dirty);
void *kbox_cow_new(int base, int over, unsigned long long size, unsigned char *dirty);
unsigned long long kbox_cow_map_len(unsigned long long size);
void kbox_cow_free(void *cow);
int kbox_cow_is(const void *ops);
void *kbox_cow_ops(void);
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

#endif
