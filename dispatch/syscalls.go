package dispatch

import (
	"slices"

	"github.com/kbox-project/kbox/sockios"
	"golang.org/x/sys/unix"
)

// The syscall table. Everything kbox knows about a syscall lives in one
// entry of table.go, written once for every architecture and keyed by the
// kernel's name: its name and family, what kbox does with it (How), the
// handler that serves it (Fn, in the file of its family), the errno of a
// refusal, the facts the fast paths and filters need, what the in-process
// tiers do differently (InProc), and why. The tiers' filters (package
// tierpolicy: the seccomp tier's and the in-process tiers'), the engine's
// dispatch, the observatory's families and the coverage tests all derive
// from it: a syscall is never native in one place and handled in another.
// Which syscalls an architecture has, and their numbers, are its own
// (numbers.go): the running architecture's entries are laid out by number
// at init, so the engine's dispatch is an array lookup.
//
// To find where a syscall is handled: look its name up in table.go; Fn
// names the handler, whose file is its family's (sys_file.go, sys_meta_stat.go,
// sys_file_path.go, sys_proc_exec.go, proc.go, sys_proc_ident.go, sys_signal.go, sys_proc_sched.go, sys_proc_sys.go,
// sys_net_socket.go, sys_other_ipc.go, sys_mem.go, ...).

// How says what kbox does with a syscall.
type How uint8

const (
	// Unknown: no entry. The engine answers ENOSYS; the coverage test
	// fails for a number of the architecture without an entry.
	Unknown How = iota
	// Native runs on the host and never reaches kbox: it touches only
	// the caller's own memory, signals, time or host objects without a
	// path (Why says which).
	Native
	// HostFD runs on the host when its first argument is a host fd (below
	// the virtual fd base); Fn serves a virtual fd.
	HostFD
	// Served always reaches kbox: Fn serves it (through LKL, on the host
	// after checks, or emulated).
	Served
	// NativeInNS runs on the host when the guest has an IPC namespace of
	// its own; Fn answers it otherwise.
	NativeInNS
	// Refused is refused by the filter with Errno, before kbox or the
	// host kernel sees it: it acts on the host itself (Why).
	Refused
	// Absent is answered with Errno, as a kernel without the syscall
	// answers; Why says why kbox does not provide it.
	Absent
)

var howNames = [...]string{Unknown: "unknown", Native: "native", HostFD: "native on host fds", Served: "served",
	NativeInNS: "native in the guest's IPC namespace", Refused: "refused", Absent: "absent"}

func (h How) String() string {
	if int(h) < len(howNames) {
		return howNames[h]
	}
	return "unknown"
}

// Facts are what the engine's fast paths need to know of a syscall.
type Facts uint16

const (
	// Pure reads LKL state without changing it (not even an access
	// time), or does not touch LKL: the stat cache stays valid
	// (cache.go) and LKL's free space does not move
	// (shadowfd/space.go).
	Pure Facts = 1 << iota
	// OwnChange (open, close, readlink, getdents64, fcntl, dup2, dup3,
	// chdir, fchdir, execve, execveat, exit_group, prctl) reports its
	// change to the stat cache itself, only when it really changed
	// something (cache.go): a read-only open, a close of a host fd or of
	// one opened read-only, a readlink of what is no symlink, a
	// directory's listing, fcntl of the fd's own flags, a dup2 between
	// host fds, a chdir to the working directory, an exec that closed no
	// virtual fd open for writing and kept the credentials, an exit that
	// closed none, or a prctl that cannot change the credentials, leaves
	// what a stat sees as it was, but for access times a listing or an
	// exec's read gives, which go to the shadows' log
	// (shadowfd/atime.go).
	OwnChange
	// AddrArg4 (with HostFD) runs on the host only while argument 4, a
	// destination address, is 0: an address may name a path, which kbox
	// resolves in the guest's filesystem (sys_net_socket.go).
	AddrArg4
	// NetServed (with HostFD) is notified on host fds too when the guest
	// has a network (--net): recvmsg and recvmmsg, whose source address
	// an internet datagram socket gets from LKL (inet/msg.go), lie in a
	// msghdr the filter cannot read. Other sockets' calls are continued.
	NetServed
	// ForkLike (fork, vfork, clone: Served) makes a task. The seccomp
	// tier's filter lets it run on the host, never notified: a notified
	// call can fail with EINTR when a signal comes before kbox received
	// it, and Linux's fork never does. Except clone with CLONE_PARENT and
	// without CLONE_THREAD, whose credentials kbox checks (sys_proc_sched.go), and
	// every one when the agent policy counts or refuses processes
	// (Policy.SeesForks).
	ForkLike
	// InFilter (Absent) is answered by the tiers' filters themselves,
	// never notified, for the same reason: clone3, whose ENOSYS makes
	// libc fall back to clone, must not fail with EINTR instead.
	InFilter
	// FilterHostFD (Served) runs on the host all the same on a host fd in
	// the seccomp tier's filter: close (a shadow's close writes nothing),
	// dup2 and dup3 (a write pump's pipe they close is flushed at the next
	// notified call: flushDonePumps). Fn serves every fd the filter lets
	// through (and every fd in the in-process tiers). A notified call
	// costs a round trip, and a signal before kbox receives it is EINTR
	// (docs/tiers.md): busybox sh's dup2 after a here-document's writer
	// exits met it in 4 of 10 here-documents.
	FilterHostFD
	// FilterNewFD (with FilterHostFD: dup2, dup3) runs on the host only
	// when argument 1, the new fd, is a host fd number too: a number in
	// the virtual range is notified. It need not be open, so it is no
	// FDArg1 (the in-process fd guard's EBADF).
	FilterNewFD
	// FDArg4 (with HostFD: mmap) has its fd in argument 4, not 0: the
	// seccomp tier's filter notifies it when that fd is in the virtual
	// range (not negative: an anonymous map passes -1).
	FDArg4
)

// InProc says what the in-process tiers (trap, rewrite: the guest runs in
// kbox's own process, sharing its memory, signals, threads and fd table)
// do with a syscall, where that differs from the seccomp tier's filter.
type InProc uint8

const (
	// AsFilter: as the seccomp tier's filter does (How), trapped where it
	// notifies.
	AsFilter InProc = iota
	// OwnMemory, OwnSignal, OwnFD and OwnProcess are answered by the
	// in-process tier itself, before the engine (trap/transport.go), on
	// every fd. OwnMemory: the memory guard keeps the guest off kbox's
	// memory (maps, unmaps, protections, AIO rings).
	OwnMemory
	// OwnSignal: signals are emulated; the host's handlers and masks are
	// kbox's.
	OwnSignal
	// OwnFD: the fd the host kernel makes is moved into the guest's fd
	// range.
	OwnFD
	// OwnProcess: thread and process state the host kernel would apply
	// to kbox (exit, prctl, seccomp, rlimits, waits, new threads and
	// processes).
	OwnProcess
	// FDGuard is trapped on host fds too and served or continued by the
	// engine: the fd guard keeps the guest off kbox's fds, and an fd the
	// call makes or frees is placed in or released from the guest's range
	// (trap/cont.go).
	FDGuard
	// GuestFDs runs on the host on the guest's own fds and is trapped on
	// any other (an fd at or above the guest's range is kbox's).
	GuestFDs
	// Inline is trapped under the rewrite tier until its site is patched
	// to answer in the site's stub (trap/rewrite.go); as AsFilter without
	// the rewrite tier.
	Inline
)

// Own reports whether the in-process tier answers the syscall itself.
func (i InProc) Own() bool { return i >= OwnMemory && i <= OwnProcess }

// FDs says where a syscall's fds are: which arguments name one, and
// whether its result is a new one. The in-process tiers' fd guard takes
// its lists from it (trap/cont.go): a closed fd of the guest's range, or
// a number at or above it that is no open virtual fd (kbox's own), is
// EBADF in an fd argument (FDArg0-2) and a bad dirfd in a directory
// argument of an *at call (Dirfd0-3), and a new fd is moved into the
// guest's range (NewFD).
type FDs uint8

const (
	// FDArg0, FDArg1, FDArg2: argument 0, 1 or 2 is an fd.
	FDArg0 FDs = 1 << iota
	FDArg1
	FDArg2
	// Dirfd0 to Dirfd3: argument 0 to 3 is the directory fd of an *at
	// call (Dirfd2: linkat's and renameat's new one; Dirfd3:
	// fanotify_mark's).
	Dirfd0
	Dirfd1
	Dirfd2
	Dirfd3
	// NewFD: the result is a new fd.
	NewFD
)

// FDArgs returns the indexes of the fd arguments as a mask (bit i:
// argument i).
func (f FDs) FDArgs() uint8 { return uint8(f & (FDArg0 | FDArg1 | FDArg2)) }

// Dirfds returns the indexes of the directory fd arguments as a mask
// (bit i: argument i).
func (f FDs) Dirfds() uint8 { return uint8(f&(Dirfd0|Dirfd1|Dirfd2|Dirfd3)) >> 3 }

// NetIoctls are the ioctl commands notified on host fds too when the
// guest has a network: FIONREAD (SIOCINQ) and SIOCOUTQ (TIOCOUTQ) of an
// internet socket count LKL's queue as well as its pair's (inet/msg.go);
// SIOCATMARK is a stream's only (ENOTTY for a datagram socket, whose
// pair would answer EOPNOTSUPP).
var NetIoctls = []uint32{unix.SIOCINQ, unix.SIOCOUTQ, unix.SIOCATMARK}

// DeviceIoctls are the ranges of ioctl commands notified on host fds in
// every run: sockios.h's commands on routes, network devices and ARP
// entries (0x890B-0x89FF) and the wireless ones (0x8B00-0x8BFF). On a
// socket kbox made (--net's pairs) or any socket of the in-process tiers,
// the host kernel would answer about the host's own devices; kbox answers
// from LKL's namespace, the guest's (package sockios, sys_io_ioctl.go).
var DeviceIoctls = sockios.Ranges

// InodeIoctls are the ioctl commands notified on host fds in every run:
// the inode flags (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS) of a shadow are its
// image file's, which LKL holds; the host's memfd has its own
// (sys_io.go).
var InodeIoctls = []uint32{unix.FS_IOC_GETFLAGS, unix.FS_IOC_SETFLAGS}

// FDIoctls are the ioctl commands whose result is a new fd: a pty's peer
// (TIOCGPTPEER, which glibc's openpty asks first) and a namespace's owner
// or parent (NS_GET_USERNS, NS_GET_PARENT). The host kernel runs them.
// The in-process tiers trap them on every fd and move the new fd into the
// guest's range, as they move the result of every call the table marks
// NewFD (tierpolicy.InProcess, trap/cont.go); a separate guest process
// gets its own lowest fd from the kernel.
var FDIoctls = []uint32{unix.TIOCGPTPEER, unix.NS_GET_USERNS, unix.NS_GET_PARENT}

// IoctlMakesFD says whether ioctl command cmd is one of FDIoctls.
func IoctlMakesFD(cmd uint64) bool { return slices.Contains(FDIoctls, uint32(cmd)) }

// Family groups syscalls for the observatory.
type Family uint8

const (
	FamOther Family = iota
	FamFile
	FamIO
	FamMeta
	FamProc
	FamSignal
	FamMem
	FamNet
	FamTime
)

var familyNames = [...]string{FamOther: "other", FamFile: "file", FamIO: "io", FamMeta: "meta", FamProc: "proc",
	FamSignal: "signal", FamMem: "mem", FamNet: "net", FamTime: "time"}

func (f Family) String() string { return familyNames[f] }

// Syscall is one entry of the table.
type Syscall struct {
	Name   string
	Fam    Family
	How    How
	Fn     Handler
	Errno  unix.Errno // Refused, Absent
	Facts  Facts
	InProc InProc // the in-process tiers, where they differ
	FDs    FDs    // where its fds are (the in-process tiers' fd guard)
	Why    string
}

// MaxNr bounds syscall numbers in the table.
const MaxNr = 512

// Lookup returns the entry of syscall nr of the running architecture (How
// Unknown when there is none).
func Lookup(nr int) Syscall {
	if nr < 0 || nr >= MaxNr {
		return Syscall{}
	}
	return linux[nr]
}

// Syscalls calls f for every entry of the running architecture's table,
// in number order.
func Syscalls(f func(nr int, s *Syscall)) {
	for nr := range linux {
		if linux[nr].How != Unknown {
			f(nr, &linux[nr])
		}
	}
}

// Names returns the names of the syscalls whose entries match keep, in
// number order: the tiers' filter lists are made with it.
func Names(keep func(s *Syscall) bool) []string {
	var out []string
	Syscalls(func(nr int, s *Syscall) {
		if keep(s) {
			out = append(out, s.Name)
		}
	})
	return out
}

// FamilyOf names the family of syscall nr ("other" when unknown).
func FamilyOf(nr int) string { return Lookup(nr).Fam.String() }

// NameOf names syscall nr ("" when unknown).
func NameOf(nr int) string { return Lookup(nr).Name }

// Handled reports whether syscall nr has a handler.
func Handled(nr int) bool { return Lookup(nr).Fn != nil }

func pure(nr int) bool { return nr >= 0 && nr < MaxNr && linux[nr].Facts&Pure != 0 }
