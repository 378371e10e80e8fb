package lkl

// LKL syscall numbers. LKL follows include/uapi/asm-generic/unistd.h, the
// table arm64 also uses; x86_64 numbers differ. The lkl-tagged tests check
// each value against the linked headers' __lkl__NR_* macros.
const (
	// The xattr family: the path form, then l* (+1) and f* (+2).
	SysSetxattr      = 5
	SysGetxattr      = 8
	SysListxattr     = 11
	SysRemovexattr   = 14
	SysGetcwd        = 17
	SysEventfd2      = 19
	SysEpollCreate1  = 20
	SysEpollCtl      = 21
	SysEpollPwait    = 22
	SysDup           = 23
	SysDup3          = 24
	SysFcntl         = 25
	SysIoctl         = 29
	SysFlock         = 32
	SysMknodat       = 33
	SysMkdirat       = 34
	SysUnlinkat      = 35
	SysSymlinkat     = 36
	SysLinkat        = 37
	SysUmount2       = 39
	SysMount         = 40
	SysStatfs        = 43
	SysFstatfs       = 44
	SysTruncate      = 45
	SysFtruncate     = 46
	SysFallocate     = 47
	SysFaccessat     = 48
	SysChdir         = 49
	SysFchdir        = 50
	SysChroot        = 51
	SysFchmod        = 52
	SysFchmodat      = 53
	SysFchownat      = 54
	SysFchown        = 55
	SysOpenat        = 56
	SysClose         = 57
	SysGetdents64    = 61
	SysLseek         = 62
	SysRead          = 63
	SysWrite         = 64
	SysReadv         = 65
	SysWritev        = 66
	SysPread64       = 67
	SysPwrite64      = 68
	SysPreadv        = 69
	SysPwritev       = 70
	SysSendfile      = 71
	SysReadlinkat    = 78
	SysNewfstatat    = 79
	SysFstat         = 80
	SysSync          = 81
	SysFsync         = 82
	SysFdatasync     = 83
	SysSyncFileRange = 84
	SysUtimensat     = 88
	SysClockSettime  = 112
	SysClockGettime  = 113
	SysUname         = 160
	SysSysinfo       = 179
	SysSethostname   = 161
	SysSetdomainname = 162
	SysUmask         = 166
	SysGetpid        = 172
	SysPpoll         = 73
	SysSocket        = 198
	SysBind          = 200
	SysListen        = 201
	SysAccept        = 202
	SysConnect       = 203
	SysGetsockname   = 204
	SysGetpeername   = 205
	SysSendto        = 206
	SysRecvfrom      = 207
	SysSetsockopt    = 208
	SysGetsockopt    = 209
	SysShutdown      = 210
	SysSendmsg       = 211
	SysRecvmsg       = 212
	SysReadahead     = 213
	SysAccept4       = 242
	SysPrlimit64     = 261
	SysSyncfs        = 267
	SysRenameat2     = 276
	SysCopyFileRange = 285
	SysStatx         = 291
	SysOpenat2       = 437
	SysCloseRange    = 436
	SysFaccessat2    = 439
	SysInotifyInit1  = 26
	SysFanotifyInit  = 262
	SysMemfdCreate   = 279
)

// inotify's calls (dispatch/sys_file_inotify.go).
const (
	SysInotifyAddWatch = 27
	SysInotifyRmWatch  = 28
)

// AtFdcwd is AT_FDCWD.
const AtFdcwd = -100
