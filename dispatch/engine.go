// Package dispatch is kbox's single syscall engine. A Request (syscall
// number, arguments and a Guest for memory access) is independent of the
// tier that caught it; the handler registered for the number decides to
// forward it to LKL, continue it on the host, emulate it, or fail it.
//
// Handlers live in one file per family (sys_file.go, sys_meta_stat.go, sys_file_path.go, sys_proc_exec.go,
// sys_proc_ident.go, sys_proc_sys.go, sys_net_socket.go, sys_net_inet.go, sys_file_dev.go, ...), each
// named by its entry in the syscall table (table.go);
// docs/tiers.md lists the families and docs/architecture.md follows one
// call through them.
package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/fifo"
	"github.com/kbox-project/kbox/gdbmirror"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/inet"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/shadowfd"
	"github.com/kbox-project/kbox/sysvipc"
	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// Disposition says where a syscall was served.
type Disposition uint8

const (
	LKL Disposition = iota
	Host
	Emulated
	Denied
	ENOSYS
)

// Action is what the tier must do with the guest's syscall.
type Action uint8

const (
	// Return answers the syscall with Val or Errno.
	Return Action = iota
	// Continue lets the host kernel run the syscall as issued.
	Continue
	// Answered means the handler already answered the syscall (AddFDReply):
	// the tier must not answer it again. Val holds the result.
	Answered
	// Deferred means the handler deferred the syscall (Guest.Defer): it
	// is answered later, the tier must not answer it, and its result is
	// not known yet.
	Deferred
)

// Result is a handler's answer.
type Result struct {
	Action Action
	Disp   Disposition
	Val    int64
	Errno  unix.Errno
}

// Guest is the tier's access to the calling guest.
type Guest interface {
	// Pid is the calling thread's host tid.
	Pid() int
	// Read copies guest memory at addr into b (all of it, or an error).
	Read(addr uint64, b []byte) error
	// ReadSome copies up to len(b) bytes, stopping early at unmapped memory.
	ReadSome(addr uint64, b []byte) (int, error)
	// Write copies b into guest memory at addr.
	Write(addr uint64, b []byte) error
	// WriteForce is Write that may also write a private read-only mapping
	// (copy-on-write, as a debugger does); exec uses it for path strings
	// that live in .rodata.
	WriteForce(addr uint64, b []byte) error
	// Valid checks that the request is still live (after reading memory).
	Valid() error
	// AddFD installs hostfd in the guest at target (-1: lowest free).
	AddFD(hostfd, target int, cloexec bool) (int, error)
	// AddFDReply installs hostfd at the lowest free guest fd and answers
	// the syscall with that number in the same step (one wake-up of the
	// guest instead of two). After success the handler must return
	// Answered.
	AddFDReply(hostfd int, cloexec bool) (int, error)
	// Defer detaches the syscall from the tier's serving loop: the handler
	// returns Deferred, and the guest waits until the Pending answers it,
	// later, while the loop serves other syscalls.
	Defer() Pending
}

// Pending is a syscall whose answer was deferred (Guest.Defer). Its methods
// may be called from any goroutine; one answer must be given, unless the
// guest has gone.
type Pending interface {
	// Valid returns nil while the guest still waits in the syscall.
	Valid() error
	// Pid is the calling thread's host tid.
	Pid() int
	// AddFD installs hostfd at the lowest free guest fd, without
	// answering.
	AddFD(hostfd int, cloexec bool) (int, error)
	// Reply answers the syscall with val.
	Reply(val int64) error
	// ReplyErrno fails the syscall with en.
	ReplyErrno(en unix.Errno) error
	// Write copies b into the guest's memory at addr.
	Write(addr uint64, b []byte) error
}

// Request is one syscall to dispatch.
type Request struct {
	Nr   int
	Args [6]uint64
	G    Guest
	P    *Proc
	// Path is the first path argument the handler read (as the guest
	// gave it), for tracing; empty if none.
	Path string
	// Peer is the remote address an internet socket's connect names or
	// its accept got ("10.0.2.2:8000"), for tracing; empty if none.
	Peer string

	// Rule names the policy rule that refused the call, if one did
	// (policy.go): the trace shows it.
	Rule string

	// CredSlot is the serving thread's lkl.CredSlot when the tier serves
	// the call on that thread, locked (nil: useCred calls into C each
	// time). useCred(r) runs only on the serving thread: a handler that
	// hands r to a goroutine of its own never calls it there.
	CredSlot *uint64

	// fdHops counts paths through /dev/fd/N resolved for this call
	// (sys_file_dev.go), bounded as symlinks are.
	fdHops uint8
	// inBind says the call resolved a path in a bind; walkLinks that
	// the call runs again with its paths walked by kbox, links followed
	// across the guest's tree, because a bind's link led out of the
	// bind (resolve.go, redoWalked).
	inBind, walkLinks bool

	// Hints, when the tier has them, is the serving thread's place for
	// answers prepared ahead (hint.go).
	Hints Hints

	// memo is the serving thread's last resolution (resolve.go): a tier
	// keeps one Request per serving thread.
	memo resolveMemo
	// hint is the thread's record for Hints (hint.go).
	hint hintState
	// roMemo is the thread's last directory found on a mount read-only
	// or not (cache.go).
	roMemo readOnlyMemo
}

// Handler serves one syscall.
type Handler func(e *Engine, r *Request) Result

// Options configures an Engine.
type Options struct {
	// RootID starts the guest as root (uid and gid 0, group 0, every
	// capability); ChangeID, when set, as UID:GID (group GID, no
	// capability); neither, with kbox's own host ids and groups.
	RootID     bool
	ChangeID   bool
	UID, GID   uint32
	VirtualFDs int // virtual fd base (host fds are below it)
	MaxFDs     int
	// HostRoutes are guest path prefixes served from the host (e.g. /proc).
	HostRoutes []string
	// Dev says the guest's /dev is kbox's (rootfs/dev.go): a private
	// devpts instance shows at /dev/pts, mounted on first use, and
	// /dev/fd, /dev/stdin, /dev/stdout and /dev/stderr name the caller's
	// own fds (sys_file_dev.go).
	Dev bool
	// Binds are host directories shown in the guest (package guestpath).
	Binds []*guestpath.Bind
	// KernelProc is an LKL fd of the kernel's own proc, outside the
	// guest's root (rootfs.Root.KernelProc), when HasKernelProc: the
	// guest's /proc/sys, /proc/net, fd links and mount table come from it
	// (package procfs).
	KernelProc    int
	HasKernelProc bool
	// Policy, when set, is the run's policy (policy.go): path rules where
	// paths are resolved, syscall rules in Dispatch, rlimits in Begin.
	Policy *Policy
	// ShadowMax, when not 0, is the largest file shadowed when it is
	// opened (shadowfd.Manager.MaxSize); larger ones are virtual fds.
	ShadowMax int64
	// NetFiles shows kbox's /etc/resolv.conf and /etc/hosts to the guest
	// (--net; sys_file_etc.go).
	NetFiles bool
	// CopyFile, when set, writes the bytes of an image file (open at an
	// LKL fd, with its stat) into a file of its size from the image's
	// blocks, or says it cannot (rootfs.Root.CopyFile): what an exec
	// reads (exec_read.go).
	CopyFile func(lfd int, st *lkl.Stat64, dst int) bool
}

// Engine is the dispatch state shared by every guest process.
type Engine struct {
	Opt     Options
	Shadows *shadowfd.Manager
	// warming is set while a library warm-up runs (warm.go): one at a
	// time.
	warming atomic.Bool
	// prewarmed is what Prewarm read for the first exec (warm.go).
	prewarmed atomic.Pointer[prewarm]
	// FIFOs are the host FIFOs behind the image's FIFOs (sys_file_dev.go). The
	// tier closes them after the last guest and before its listener:
	// parked opens are answered through it.
	FIFOs *fifo.Set
	// Tier is the tier that runs the guest: it starts the programs
	// of execve (sys_proc_exec.go).
	Tier Tier
	// GuestFdOpen, set by the in-process tiers, reports whether fd of
	// kbox's own process (which is the guest's) is an open fd of the
	// guest's: not a free number's placeholder, not kbox's own (Go's
	// netpoll). The guest's /proc shows no other (procserve.go).
	GuestFdOpen func(fd int) bool
	// Pins, when set, is the tier's pinning of guest tasks (sys_proc_sched.go).
	Pins Pins
	// OnExec, when set, sees every exec the tier carried out, with its
	// argv and the hash of the file's bytes (exechook.go): the audit log.
	OnExec func(*ExecRecord)
	// Sockets names the guest's unix sockets (sys_net_socket.go); the tier sets
	// it once the guest's namespaces and socket binder exist. nil: no
	// path can be bound, abstract names are refused.
	Sockets *unixsock.Set
	// Net, when set, serves AF_INET and AF_INET6 sockets in LKL
	// (package inet, through sys_net_inet.go's handlers); nil: no network.
	Net *inet.Net
	// IPCNamespace says that the guest has an IPC namespace of its own:
	// System V IPC and POSIX message queues run natively (sys_other_ipc.go).
	IPCNamespace bool
	// RootPid is the first guest process; signals reach only it and its
	// descendants. Keeper is its parent (seccomp/supervisor/guestinit.c),
	// a subreaper: the guest's orphans become its children. Keeper 0
	// means the guest is kbox's own process (an in-process tier).
	RootPid, Keeper int
	// Binder is the socket binder's pid when the keeper forked it (its
	// child, beside the guest): not a guest process (procfs.GuestTgids).
	Binder int
	// Observe, when set, sees every syscall Serve serves; Debug prints
	// each on stderr (lifecycle.go).
	Observe Observer
	Debug   bool
	// OnRefuse, when set, sees every call a policy rule refused
	// (policy.go): the audit log.
	OnRefuse func(*Refusal)

	life lifecycle // Stop and Close, once each (lifecycle.go)

	// procs maps thread and process ids to processes. It is copied on
	// write (under mu) and read without a lock: every notification looks
	// its process up, processes come and go far more rarely.
	mu    sync.Mutex
	procs atomic.Pointer[map[int]*Proc]

	enosys [MaxNr]atomic.Uint64
	pumps  pumpSet // dup2 bridges' write pumps (bridge.go)

	anyRO bool // some bind is read-only

	pts guestpath.Devpts // the private devpts instance at /dev/pts (sys_file_dev.go)

	stats guestpath.StatCache // LKL path stats while nothing changed (cache.go)
	// xfacts: extended attributes files lack, while nothing changed
	// (xattr_facts.go).
	xfacts xattrFacts

	lateSock lateReplies // answers of socket calls that waited (sys_net_socket.go)
	windows  atomic.Bool // kbox put a host fd at a virtual fd's number (sys_mem_map.go, sys_file_locks.go)
	locks    lockProxies // the host's stand-ins of virtual fds' files for locks (sys_file_locks.go)

	notify inotifies // the guest's inotify fds (sys_file_inotify.go)

	sysv    sysvipc.State  // the guest's System V objects as it sees them
	mqueues sysvipc.Queues // its POSIX message queues' owners and modes

	// initCred is the first process's credentials, unknownCred those of
	// a process whose parent was not found (proc.go); credsChanged says
	// some process changed its own since the start.
	initCred, unknownCred *procCred
	credsChanged          atomic.Bool
	// initOOM is the first process's oom_score_adj, the host's value
	// (procfs.Ident).
	initOOM int16
	// sweepAt is the number of entries at which a new task sweeps the
	// dead ones out while credentials are all alike (proc.go Lookup).
	sweepAt atomic.Int64

	gdbState // the debug mirror's (gdb.go)
}

// New returns an Engine.
func New(opt Options) *Engine {
	if opt.VirtualFDs == 0 {
		opt.VirtualFDs = 1024
	}
	if opt.MaxFDs == 0 {
		opt.MaxFDs = 4096
	}
	e := &Engine{Opt: opt, Shadows: shadowfd.New(), FIFOs: fifo.New()}
	e.Shadows.CopyFile = opt.CopyFile
	if opt.ShadowMax != 0 {
		e.Shadows.MaxSize = opt.ShadowMax
	}
	e.procs.Store(&map[int]*Proc{})
	e.Shadows.Holders = func() []int { return e.Tgids(nil) }
	e.Shadows.WritersGone = e.writersGone // IN_CLOSE_WRITE (sys_file_inotify.go)
	e.initCred = newProcCred(initialCred(&opt))
	e.unknownCred = newProcCred(unknownCred())
	for _, b := range opt.Binds {
		e.anyRO = e.anyRO || b.ReadOnly
	}
	setDebugRoot(e) // for Delve (gdb.go)
	e.gdbInit()     // KBOX_GDB=1: the debug mirror (gdb.go)
	return e
}

// Dispatch serves r.
func (e *Engine) Dispatch(r *Request) Result {
	if gdbmirror.On() {
		return e.gdbDispatch(r) // the debug mirror (gdb.go)
	}
	return e.dispatch(r)
}

func (e *Engine) dispatch(r *Request) Result {
	if r.Nr < 0 || r.Nr >= MaxNr {
		return Result{Disp: ENOSYS, Errno: unix.ENOSYS}
	}
	if e.Opt.Policy != nil {
		if res, refused := e.policyCall(r); refused {
			return res
		}
	}
	r.fdHops = 0
	if e.pumps.n.Load() != 0 {
		e.flushDonePumps() // bridge.go
	}
	sc := &linux[r.Nr]
	if sc.Facts&(Pure|OwnChange) == 0 {
		e.stats.Changed()
	}
	if sc.Fn == nil {
		return e.unserved(r, sc)
	}
	// LKL calls from here on run with the caller's credentials.
	if en := useCred(r); en != 0 {
		return errno(en, Emulated)
	}
	r.inBind, r.walkLinks = false, false
	res := sc.Fn(e, r)
	if res.Errno == unix.EXDEV && r.inBind {
		res = e.redoWalked(r, sc) // resolve.go
	}
	if sc.Facts&(Pure|OwnChange) == 0 {
		// Again once it is done: what the handler looked up and cached
		// before its change (a path checked by the policy before the
		// symlink that creates it, canonPaths) is stale now.
		e.stats.Changed()
		e.notifySweep() // its inotify events, at once
	}
	if res.Disp == ENOSYS {
		e.enosys[r.Nr].Add(1) // answered as absent: counted as well
	}
	if sc.Facts&Pure == 0 {
		// LKL's free space may have changed: shadows' writes must still
		// fail where the image would be full (shadowfd/space.go).
		e.Shadows.Rebalance()
	}
	return res
}

// unserved answers a syscall that has no handler: one the table says is
// absent (its errno), denied (a filter let it through: the tier's is
// coarser, or none), native (a tier that trapped it anyway runs it on the
// host), or unknown (ENOSYS).
func (e *Engine) unserved(r *Request, sc *Syscall) Result {
	switch sc.How {
	case Native:
		return cont
	case Refused:
		return errno(sc.Errno, Denied)
	case Absent:
		e.enosys[r.Nr].Add(1)
		return errno(sc.Errno, ENOSYS)
	}
	e.enosys[r.Nr].Add(1)
	return Result{Disp: ENOSYS, Errno: unix.ENOSYS}
}

// ENOSYSCounts returns the per-number count of unimplemented syscalls.
func (e *Engine) ENOSYSCounts() map[int]uint64 {
	m := map[int]uint64{}
	for i := range e.enosys {
		if n := e.enosys[i].Load(); n != 0 {
			m[i] = n
		}
	}
	return m
}

func ok(v int64, d Disposition) Result { return Result{Val: v, Disp: d} }

func answered(v int64, d Disposition) Result { return Result{Action: Answered, Val: v, Disp: d} }

func deferred(d Disposition) Result { return Result{Action: Deferred, Disp: d} }

func fail(err error, d Disposition) Result {
	if en, isErrno := err.(unix.Errno); isErrno {
		return Result{Errno: en, Disp: d}
	}
	return Result{Errno: unix.EIO, Disp: d}
}

func errno(en unix.Errno, d Disposition) Result { return Result{Errno: en, Disp: d} }

var cont = Result{Action: Continue, Disp: Host}

// newTable returns a virtual fd table configured for e.
func (e *Engine) newTable() *fdtable.Table {
	return fdtable.New(e.Opt.VirtualFDs, e.Opt.MaxFDs, func(lklfd int) { lklClose(lklfd) })
}
