package web

import "strings"

// familyOf lists the syscalls of each family by name; anything not listed
// falls to the prefix rules in Family, then to "other".
var familyOf = map[string]string{}

func init() {
	for fam, names := range map[string][]string{
		"file": {"open", "openat", "openat2", "creat", "close", "close_range", "mkdir", "mkdirat",
			"rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat",
			"symlink", "symlinkat", "readlink", "readlinkat", "chdir", "fchdir", "getcwd",
			"truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "sync", "syncfs", "flock",
			"mount", "umount2", "chroot", "mknod", "mknodat", "getdents", "getdents64",
			"dup", "dup2", "dup3", "fcntl", "memfd_create", "name_to_handle_at", "open_by_handle_at",
			"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "umask"},
		"io": {"read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
			"preadv2", "pwritev2", "lseek", "sendfile", "copy_file_range", "splice", "tee",
			"ioctl", "pipe", "pipe2", "poll", "ppoll", "select", "pselect6", "epoll_create",
			"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
			"eventfd", "eventfd2", "io_setup", "io_submit", "io_getevents", "io_destroy"},
		"meta": {"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access",
			"faccessat", "faccessat2", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
			"fchownat", "utime", "utimes", "futimesat", "utimensat", "getxattr", "lgetxattr",
			"fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr", "llistxattr",
			"flistxattr", "removexattr", "lremovexattr", "fremovexattr"},
		"proc": {"execve", "execveat", "clone", "clone3", "fork", "vfork", "exit", "exit_group",
			"wait4", "waitid", "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid",
			"getegid", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
			"getresuid", "getresgid", "setfsuid", "setfsgid", "getgroups", "setgroups",
			"setpgid", "getpgid", "getpgrp", "setsid", "getsid", "uname", "prctl", "arch_prctl",
			"set_tid_address", "getrlimit", "setrlimit", "prlimit64", "getrusage", "sysinfo",
			"capget", "capset", "personality", "getrandom", "sethostname", "setdomainname",
			"sched_yield", "sched_getaffinity", "sched_setaffinity", "getpriority", "setpriority",
			"set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv", "seccomp",
			"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd"},
		"signal": {"kill", "tkill", "tgkill", "pause", "sigaltstack", "signalfd", "signalfd4",
			"pidfd_send_signal", "restart_syscall"},
		"mem": {"mmap", "munmap", "mprotect", "mremap", "msync", "madvise", "brk", "mincore",
			"mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier", "mbind",
			"set_mempolicy", "get_mempolicy", "pkey_mprotect", "pkey_alloc", "pkey_free"},
		"net": {"socket", "socketpair", "bind", "listen", "accept", "accept4", "connect",
			"getsockname", "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg",
			"sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt"},
		"time": {"nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "clock_settime",
			"gettimeofday", "settimeofday", "time", "times", "alarm", "setitimer", "getitimer",
			"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
			"timerfd_create", "timerfd_settime", "timerfd_gettime", "adjtimex", "clock_adjtime"},
	} {
		for _, n := range names {
			familyOf[n] = fam
		}
	}
}

// Family names the family ("file", "io", "meta", "proc", "signal", "mem",
// "net", "time" or "other") of a Linux syscall by its name.
func Family(name string) string {
	if f, ok := familyOf[name]; ok {
		return f
	}
	switch {
	case strings.HasPrefix(name, "rt_sig"):
		return "signal"
	case strings.HasPrefix(name, "sched_"):
		return "proc"
	case strings.HasPrefix(name, "io_uring"):
		return "io"
	}
	return "other"
}
