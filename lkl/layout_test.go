//go:build lkl

package lkl

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestLayoutMatchesHeaders holds the Go ABI definitions to the linked LKL
// headers.
func TestLayoutMatchesHeaders(t *testing.T) {
	var s Stat64
	c := cLayout()
	want := map[string]uintptr{
		"sizeof(stat)":     unsafe.Sizeof(s),
		"st_mode":          unsafe.Offsetof(s.Mode),
		"st_size":          unsafe.Offsetof(s.Size),
		"st_blksize":       unsafe.Offsetof(s.Blksize),
		"st_blocks":        unsafe.Offsetof(s.Blocks),
		"st_mtime_nsec":    unsafe.Offsetof(s.MtimeNsec),
		"st_ctime_nsec":    unsafe.Offsetof(s.CtimeNsec),
		"sizeof(statx)":    SizeofStatx,
		"NR_openat":        SysOpenat,
		"NR_newfstatat":    SysNewfstatat,
		"NR_getdents64":    SysGetdents64,
		"NR_renameat2":     SysRenameat2,
		"NR_statx":         SysStatx,
		"NR_mount":         SysMount,
		"NR_chroot":        SysChroot,
		"NR_uname":         SysUname,
		"NR_sethostname":   SysSethostname,
		"NR_setdomainname": SysSetdomainname,
		"NR_umask":         SysUmask,
		"NR_clock_settime": SysClockSettime,
		"NR_openat2":       SysOpenat2,
		"NR_faccessat2":    SysFaccessat2,
		"NR_setxattr":      SysSetxattr, "NR_lsetxattr": SysSetxattr + 1, "NR_fsetxattr": SysSetxattr + 2,
		"NR_getxattr": SysGetxattr, "NR_lgetxattr": SysGetxattr + 1, "NR_fgetxattr": SysGetxattr + 2,
		"NR_listxattr": SysListxattr, "NR_llistxattr": SysListxattr + 1, "NR_flistxattr": SysListxattr + 2,
		"NR_removexattr": SysRemovexattr, "NR_lremovexattr": SysRemovexattr + 1, "NR_fremovexattr": SysRemovexattr + 2,
		"NR_prlimit64": SysPrlimit64,
		"NR_ppoll":     SysPpoll, "NR_socket": SysSocket, "NR_bind": SysBind, "NR_listen": SysListen,
		"NR_accept": SysAccept, "NR_connect": SysConnect, "NR_getsockname": SysGetsockname,
		"NR_getpeername": SysGetpeername, "NR_sendto": SysSendto, "NR_recvfrom": SysRecvfrom,
		"NR_setsockopt": SysSetsockopt, "NR_getsockopt": SysGetsockopt, "NR_shutdown": SysShutdown, "NR_readahead": SysReadahead, "NR_accept4": SysAccept4,
		"NR_sendmsg": SysSendmsg, "NR_recvmsg": SysRecvmsg,
		"NR_syncfs":          SysSyncfs,
		"NR_sysinfo":         SysSysinfo,
		"NR_sync_file_range": SysSyncFileRange,
		"NR_fallocate":       SysFallocate,
		"NR_fstatfs":         SysFstatfs,
		"NR_epoll_create1":   SysEpollCreate1,
		"NR_epoll_ctl":       SysEpollCtl,
		"NR_epoll_pwait":     SysEpollPwait,
		"NR_inotify_init1":   SysInotifyInit1,
		"NR_fanotify_init":   SysFanotifyInit,
		"NR_memfd_create":    SysMemfdCreate,

		"NR_inotify_add_watch": SysInotifyAddWatch, "NR_inotify_rm_watch": SysInotifyRmWatch,
		// kbox passes unix.EpollEvent to LKL's epoll (package lklready):
		// LKL is built with the host's compiler, so its layout is the host's.
		"sizeof(epoll_event)": unsafe.Sizeof(unix.EpollEvent{}),
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("%s: Go %d, LKL headers %d", k, v, c[k])
		}
	}
}

func TestAPIGeneration(t *testing.T) {
	if g := APIGeneration(); g != 1 && g != 2 {
		t.Errorf("API generation %d", g)
	}
}
