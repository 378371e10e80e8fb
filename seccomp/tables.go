//go:build linux

package seccomp

import (
	"fmt"
	"runtime"
	"sort"

	elarch "github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// Arch describes one syscall ABI the filter can be built for. Syscall
// name→number tables come from github.com/elastic/go-seccomp-bpf/arch, which
// are generated from the kernel headers and available on every host, so a
// filter for either architecture can be built and simulated anywhere.
type Arch struct {
	Name      string
	AuditArch uint32
	// X32Bit is non-zero on x86_64: syscall numbers with this bit set belong
	// to the x32 ABI, which the filter refuses with ENOSYS.
	X32Bit uint32
	// Syscalls maps syscall names to numbers for this ABI. Do not modify.
	Syscalls map[string]int
}

// The architectures kbox supports.
var (
	ArchX86_64 = &Arch{
		Name:      "x86_64",
		AuditArch: unix.AUDIT_ARCH_X86_64,
		X32Bit:    0x40000000,
		Syscalls:  elarch.X86_64.SyscallNames,
	}
	ArchAArch64 = &Arch{
		Name:      "aarch64",
		AuditArch: unix.AUDIT_ARCH_AARCH64,
		Syscalls:  elarch.AARCH64.SyscallNames,
	}
)

// NativeArch returns the Arch of the running binary, or nil if kbox does not
// support it.
func NativeArch() *Arch {
	switch runtime.GOARCH {
	case "amd64":
		return ArchX86_64
	case "arm64":
		return ArchAArch64
	}
	return nil
}

// tableNames maps kernel syscall names to the names go-seccomp-bpf's
// generated tables use for them, where they differ (its aarch64 table
// names 64-bit newfstatat after the generic header's fstatat).
var tableNames = map[string]string{"newfstatat": "fstatat"}

// Nr returns the number of syscall name on a, and whether it exists there.
func (a *Arch) Nr(name string) (uint32, bool) {
	n, ok := a.Syscalls[name]
	if !ok && tableNames[name] != "" {
		n, ok = a.Syscalls[tableNames[name]]
	}
	return uint32(n), ok
}

// Names returns the kernel's name of each syscall number of a.
func (a *Arch) Names() map[int]string {
	m := make(map[int]string, len(a.Syscalls))
	for name, nr := range a.Syscalls {
		m[nr] = name
	}
	for kernel, table := range tableNames {
		if nr, ok := a.Syscalls[table]; ok {
			if _, clash := a.Syscalls[kernel]; !clash {
				m[nr] = kernel
			}
		}
	}
	return m
}

// Rule names a syscall and says why it is in a list.
type Rule struct {
	Name   string
	Reason string
}

// Syscall is a Rule resolved for one architecture.
type Syscall struct {
	Name   string
	Nr     uint32
	Reason string
}

// Resolve maps rules to numbers on a, sorted by number. Names that do not
// exist on a (e.g. iopl on aarch64) are skipped.
func (a *Arch) Resolve(rules []Rule) []Syscall {
	out := make([]Syscall, 0, len(rules))
	for _, r := range rules {
		if nr, ok := a.Nr(r.Name); ok {
			out = append(out, Syscall{Name: r.Name, Nr: nr, Reason: r.Reason})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Nr < out[j].Nr })
	return out
}

// knownName reports whether name is a syscall on any supported arch.
func knownName(name string) bool {
	_, a := ArchX86_64.Nr(name)
	_, b := ArchAArch64.Nr(name)
	return a || b
}

// DenyRules are refused in BPF with EPERM: the guest never reaches the
// supervisor or the host kernel with them. The list targets the host kernel
// and the supervisor itself; everything the guest may legitimately want
// (mount, chroot, kill, sethostname, ...) is emulated by the supervisor
// instead and is deliberately absent here.
var DenyRules = []Rule{
	{"reboot", "reboots or halts the host"},
	{"kexec_load", "replaces the running host kernel"},
	{"kexec_file_load", "replaces the running host kernel"},
	{"init_module", "loads code into the host kernel"},
	{"finit_module", "loads code into the host kernel"},
	{"delete_module", "unloads host kernel modules"},
	{"bpf", "loads eBPF into the host kernel; large attack surface"},
	{"ptrace", "could attach to the supervisor or other tasks and rewrite their syscalls"},
	{"perf_event_open", "host kernel attack surface and side-channel/info leaks"},
	{"pivot_root", "changes the host mount namespace root; mounts are emulated in LKL"},
	{"fsopen", "new mount API on the host; mounts are emulated in LKL"},
	{"fsconfig", "new mount API on the host; mounts are emulated in LKL"},
	{"fsmount", "new mount API on the host; mounts are emulated in LKL"},
	{"fspick", "new mount API on the host; mounts are emulated in LKL"},
	{"move_mount", "new mount API on the host; mounts are emulated in LKL"},
	{"open_tree", "clones host mount trees into fds"},
	{"mount_setattr", "changes host mount attributes"},
	{"keyctl", "kernel keyrings are not namespaced and reach host secrets"},
	{"add_key", "kernel keyrings are not namespaced"},
	{"request_key", "kernel keyrings are not namespaced; can upcall to host helpers"},
	{"swapon", "reconfigures host swap"},
	{"swapoff", "reconfigures host swap"},
	{"clock_settime", "sets the host clock"},
	{"clock_adjtime", "adjusts the host clock"},
	{"settimeofday", "sets the host clock"},
	{"adjtimex", "adjusts the host clock"},
	{"acct", "turns on host process accounting to a host path"},
	{"quotactl", "manipulates host filesystem quotas"},
	{"quotactl_fd", "manipulates host filesystem quotas"},
	{"setns", "enters host namespaces behind the supervisor's back"},
	{"unshare", "creates host namespaces the supervisor cannot model"},
	{"userfaultfd", "can stall the supervisor's reads of guest memory; common exploit primitive"},
	{"io_uring_setup", "io_uring performs I/O without syscalls, bypassing the filter"},
	{"io_uring_enter", "io_uring performs I/O without syscalls, bypassing the filter"},
	{"io_uring_register", "io_uring performs I/O without syscalls, bypassing the filter"},
	{"open_by_handle_at", "opens host files by handle, escaping any path confinement"},
	{"name_to_handle_at", "leaks host filesystem handles (companion of open_by_handle_at)"},
	{"process_vm_readv", "reads other processes' memory"},
	{"process_vm_writev", "writes other processes' memory"},
	{"process_madvise", "alters other processes' memory"},
	{"process_mrelease", "reaps another process's memory"},
	{"pidfd_getfd", "steals file descriptors from other processes"},
	{"kcmp", "compares kernel objects of other processes; kernel pointer ordering leak"},
	{"lookup_dcookie", "obsolete profiling interface into host kernel dentries"},
	{"vhangup", "hangs up the host controlling terminal"},
	{"syslog", "reads or clears the host kernel log"},
	{"fanotify_init", "filesystem-wide host event monitoring"},
	{"fanotify_mark", "filesystem-wide host event monitoring"},
	{"memfd_secret", "memory the supervisor cannot read, hiding syscall arguments"},
	{"get_robust_list", "reads another task's robust-futex pointer (ASLR leak)"},
	{"move_pages", "queries and moves other processes' pages"},
	{"migrate_pages", "moves other processes' pages"},
	{"nfsservctl", "removed NFS server control; never legitimate"},
	{"iopl", "raises I/O privilege level on the host (x86 only)"},
	{"ioperm", "grants direct host I/O port access (x86 only)"},
	{"modify_ldt", "historic source of kernel bugs; not needed by 64-bit code (x86 only)"},
	{"uselib", "obsolete a.out loader (x86 only)"},
	{"ustat", "obsolete host filesystem statistics (x86 only)"},
	{"sysfs", "obsolete host filesystem type enumeration (x86 only)"},
	{"_sysctl", "removed binary sysctl interface (x86 only)"},
}

// Deny tables per architecture, name → number with the reason.
var (
	DenyX86_64  = ArchX86_64.Resolve(DenyRules)
	DenyAArch64 = ArchAArch64.Resolve(DenyRules)
)

// DefaultAllow are syscalls that only touch the calling task's own memory,
// signals, timing or exit and never need the supervisor; the filter lets them
// run natively with no round trip. They include everything the Go runtime
// does in steady state except mmap/clone/getpid/tgkill, which stay notified.
//
// mremap and munmap are safe only while the supervisor keeps no state about
// guest mappings; a supervisor that does must drop them from its Allow list.
var DefaultAllow = []string{
	"brk", "munmap", "mremap", "madvise",
	"futex", "futex_waitv", "set_robust_list", "rseq",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"sched_yield", "nanosleep", "clock_nanosleep",
	"clock_gettime", "clock_getres", "gettimeofday",
	"restart_syscall", "getrandom",
	"exit", "exit_group",
}

// DefaultHostFD are syscalls whose first argument is a file descriptor and
// that are harmless to run natively when that fd is a host fd (below
// VirtualFDBase). Syscalls that take a second fd (epoll_ctl, dup2, sendmsg
// with SCM_RIGHTS, ...) or change the fd table (close, dup) are not here:
// the supervisor needs to see them.
//
// ioctl gets an extra guard in BPF: TIOCSTI and TIOCLINUX are refused with
// EPERM whatever the fd, because injecting input into a host terminal escapes
// any sandbox. fcntl gets one too: F_DUPFD and F_DUPFD_CLOEXEC with a
// minimum at or above VirtualFDBase are notified whatever the fd (natively
// they fail with EINVAL, the guest's RLIMIT_NOFILE being the base). sendto
// with a destination address is notified too (Policy.NullArg): the
// address may name a path, which the supervisor resolves in the guest's
// filesystem, never the host's.
var DefaultHostFD = []string{
	"read", "write", "readv", "writev",
	"pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
	"fstat", "lseek", "ioctl", "fcntl", "fsync", "fdatasync",
	"epoll_wait", "epoll_pwait", "epoll_pwait2",
	"recvfrom", "sendto",
}

// Terminal ioctls refused by the ioctl guard.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// fcntl commands that make a new fd at or above their argument (the same
// numbers on every architecture): with a minimum at or above the virtual
// fd base, the new fd is virtual, so the fcntl guard notifies them.
const (
	fcntlDupfd        = unix.F_DUPFD
	fcntlDupfdCloexec = unix.F_DUPFD_CLOEXEC
)

func checkNames(list string, names []string) error {
	for _, n := range names {
		if !knownName(n) {
			return fmt.Errorf("seccomp: %s: unknown syscall %q", list, n)
		}
	}
	return nil
}
