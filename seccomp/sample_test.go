//go:build linux

package seccomp

// A sample policy for the compiler's tests, shaped like kbox's (whose
// lists derive from the syscall table, dispatch/table.go, in
// tierpolicy.Seccomp): a deny list, native syscalls, syscalls
// native on host fds with the ioctl and fcntl guards, sendto's address.

var sampleDeny = []string{
	"reboot", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "bpf", "ptrace", "perf_event_open", "pivot_root", "fsopen", "fsconfig",
	"fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "keyctl", "add_key",
	"request_key", "swapon", "swapoff", "clock_settime", "clock_adjtime", "settimeofday",
	"adjtimex", "acct", "quotactl", "quotactl_fd", "setns", "unshare", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "open_by_handle_at",
	"name_to_handle_at", "process_vm_readv", "process_vm_writev", "process_madvise",
	"process_mrelease", "pidfd_getfd", "kcmp", "lookup_dcookie", "vhangup", "syslog",
	"fanotify_init", "fanotify_mark", "memfd_secret", "get_robust_list", "move_pages",
	"migrate_pages", "nfsservctl", "iopl", "ioperm", "modify_ldt", "uselib", "ustat",
	"sysfs", "_sysctl",
}

var sampleAllow = []string{
	"brk", "munmap", "mremap", "madvise",
	"futex", "futex_waitv", "set_robust_list", "rseq",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"sched_yield", "nanosleep", "clock_nanosleep",
	"clock_gettime", "clock_getres", "gettimeofday",
	"restart_syscall", "getrandom",
	"exit", "exit_group",
}

var sampleHostFD = []string{
	"read", "write", "readv", "writev",
	"pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
	"fstat", "lseek", "ioctl", "fcntl", "fsync", "fdatasync",
	"epoll_wait", "epoll_pwait", "epoll_pwait2",
	"recvfrom", "sendto",
}

// samplePolicy returns the sample policy for the native architecture.
func samplePolicy() *Policy {
	p := NewPolicy(NativeArch())
	p.Deny = append([]string(nil), sampleDeny...)
	p.Allow = append([]string(nil), sampleAllow...)
	p.HostFD = append([]string(nil), sampleHostFD...)
	p.NullArg = map[string]int{"sendto": 4}
	return p
}
