//go:build lkl

package lkl

/*
#include <stddef.h>
#include <lkl.h>
#include <lkl/linux/eventpoll.h>
#define OFF(f) static size_t off_##f(void) { return offsetof(struct lkl_stat, f); }
OFF(st_mode) OFF(st_size) OFF(st_blksize) OFF(st_blocks) OFF(st_mtime_nsec) OFF(st_ctime_nsec)
*/
import "C"

// cLayout reports sizes, offsets and syscall numbers from the linked LKL
// headers, for the tests that hold the Go definitions to them.
func cLayout() map[string]uintptr {
	return map[string]uintptr{
		"sizeof(stat)":     C.sizeof_struct_lkl_stat,
		"st_mode":          uintptr(C.off_st_mode()),
		"st_size":          uintptr(C.off_st_size()),
		"st_blksize":       uintptr(C.off_st_blksize()),
		"st_blocks":        uintptr(C.off_st_blocks()),
		"st_mtime_nsec":    uintptr(C.off_st_mtime_nsec()),
		"st_ctime_nsec":    uintptr(C.off_st_ctime_nsec()),
		"sizeof(statx)":    C.sizeof_struct_lkl_statx,
		"NR_openat":        C.__lkl__NR_openat,
		"NR_newfstatat":    C.__lkl__NR3264_fstatat,
		"NR_getdents64":    C.__lkl__NR_getdents64,
		"NR_renameat2":     C.__lkl__NR_renameat2,
		"NR_statx":         C.__lkl__NR_statx,
		"NR_mount":         C.__lkl__NR_mount,
		"NR_chroot":        C.__lkl__NR_chroot,
		"NR_uname":         C.__lkl__NR_uname,
		"NR_sethostname":   C.__lkl__NR_sethostname,
		"NR_setdomainname": C.__lkl__NR_setdomainname,
		"NR_umask":         C.__lkl__NR_umask,
		"NR_clock_settime": C.__lkl__NR_clock_settime,
		"NR_openat2":       C.__lkl__NR_openat2,
		"NR_faccessat2":    C.__lkl__NR_faccessat2,
		"NR_setxattr":      C.__lkl__NR_setxattr, "NR_lsetxattr": C.__lkl__NR_lsetxattr, "NR_fsetxattr": C.__lkl__NR_fsetxattr,
		"NR_getxattr": C.__lkl__NR_getxattr, "NR_lgetxattr": C.__lkl__NR_lgetxattr, "NR_fgetxattr": C.__lkl__NR_fgetxattr,
		"NR_listxattr": C.__lkl__NR_listxattr, "NR_llistxattr": C.__lkl__NR_llistxattr, "NR_flistxattr": C.__lkl__NR_flistxattr,
		"NR_removexattr": C.__lkl__NR_removexattr, "NR_lremovexattr": C.__lkl__NR_lremovexattr, "NR_fremovexattr": C.__lkl__NR_fremovexattr,
		"NR_prlimit64": C.__lkl__NR_prlimit64,
		"NR_ppoll":     C.__lkl__NR_ppoll, "NR_socket": C.__lkl__NR_socket, "NR_bind": C.__lkl__NR_bind,
		"NR_listen": C.__lkl__NR_listen, "NR_accept": C.__lkl__NR_accept, "NR_connect": C.__lkl__NR_connect,
		"NR_getsockname": C.__lkl__NR_getsockname, "NR_getpeername": C.__lkl__NR_getpeername,
		"NR_sendto": C.__lkl__NR_sendto, "NR_recvfrom": C.__lkl__NR_recvfrom, "NR_sendmsg": C.__lkl__NR_sendmsg, "NR_recvmsg": C.__lkl__NR_recvmsg, "NR_setsockopt": C.__lkl__NR_setsockopt,
		"NR_getsockopt": C.__lkl__NR_getsockopt, "NR_shutdown": C.__lkl__NR_shutdown, "NR_readahead": C.__lkl__NR_readahead, "NR_accept4": C.__lkl__NR_accept4,
		"NR_syncfs":           C.__lkl__NR_syncfs,
		"NR_sysinfo":          C.__lkl__NR_sysinfo,
		"NR_sync_file_range":  C.__lkl__NR_sync_file_range,
		"NR_fallocate":        C.__lkl__NR_fallocate,
		"NR_fstatfs":          C.__lkl__NR_fstatfs,
		"NR_epoll_create1":    C.__lkl__NR_epoll_create1,
		"NR_epoll_ctl":        C.__lkl__NR_epoll_ctl,
		"NR_epoll_pwait":      C.__lkl__NR_epoll_pwait,
		"NR_inotify_init1":    C.__lkl__NR_inotify_init1,
		"NR_fanotify_init":    C.__lkl__NR_fanotify_init,
		"NR_memfd_create":     C.__lkl__NR_memfd_create,
		"sizeof(epoll_event)": C.sizeof_struct_lkl_epoll_event,

		// dispatch/sys_file_inotify.go
		"NR_inotify_add_watch": C.__lkl__NR_inotify_add_watch, "NR_inotify_rm_watch": C.__lkl__NR_inotify_rm_watch,
	}
}
