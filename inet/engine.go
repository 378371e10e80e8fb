package inet

import (
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// What the package needs of the syscall engine (package dispatch), which
// implements these interfaces: the package does not import it.

// Call is the engine's side of one guest syscall on an internet socket.
type Call interface {
	// Read and Write copy the caller's memory.
	Read(addr uint64, b []byte) error
	Write(addr uint64, b []byte) error
	// FD returns kbox's copy of the caller's fd fd (the same open file
	// description); the caller of FD closes it.
	FD(fd int) (int, error)
	// Holder is the calling process, whose fds can be copied later
	// (Sock.guestCopy).
	Holder() Holder
	// AddFDReply installs hostfd at the caller's lowest free fd and
	// answers the call with it (then the result is Answered).
	AddFDReply(hostfd int, cloexec bool) (int, error)
	// Replace installs hostfd at the caller's fd fd, in place of what
	// is there, keeping fd's close-on-exec.
	Replace(hostfd, fd int) error
	// UseCred makes this thread's LKL calls carry the caller's
	// credentials.
	UseCred() unix.Errno
	// Defer detaches the call from the engine's serving loop for a wait
	// a signal may end: timeout says the socket has a timeout (the
	// signal's errno is EINTR then, else ERESTARTSYS); coop, that the
	// wait answers itself when signalled. The result is Deferred.
	Defer(timeout, coop bool) Pending
}

// Holder is a guest process whose fds kbox can copy.
type Holder interface {
	FD(fd int) (int, error)
}

// Pending is a deferred call (Call.Defer). Its methods may be called from
// any goroutine; one answer must be given, unless the guest has gone.
type Pending interface {
	// Valid returns nil while the guest still waits in the call.
	Valid() error
	// Signalled reports whether the guest has a signal to take that
	// ends its wait.
	Signalled() bool
	Write(addr uint64, b []byte) error
	// AddFD installs hostfd at the lowest free fd, without answering.
	AddFD(hostfd int, cloexec bool) (int, error)
	Reply(v int64) error
	ReplyErrno(en unix.Errno) error
	// Claim holds the guest in the call while the wait takes what it
	// cannot put back (a connection off the queue): a signal then waits
	// for the answer. It reports false when the guest no longer waits.
	// Release ends a claim that took nothing; a signal that came
	// meanwhile ends the call then.
	Claim() bool
	Release()
}

// Engine is what the package needs of the engine beyond one call.
type Engine interface {
	// Late runs answer (a deferred call's) unless the engine no longer
	// takes late answers.
	Late(answer func())
	// WatchInterrupt answers p with ERESTARTSYS when a signal ends the
	// guest's wait, until stop is closed.
	WatchInterrupt(p Pending, stop <-chan struct{})
	// IntrErrno is what a wait a signal ended answers (timeout: the
	// socket has one).
	IntrErrno(timeout bool) unix.Errno
	// FindSocket returns kbox's copy of the guest's socket whose inode
	// is ino, from any guest process that holds it, or -1.
	FindSocket(ino uint64) int
}

// Req is one guest call the package serves: its arguments as the guest
// gave them, the engine's side of it, and what the engine traces.
type Req struct {
	Args [6]uint64
	G    Call
	// Peer is set to the remote address a connect names or an accept
	// got ("10.0.2.2:8000"), for tracing.
	Peer string
}

// Disp says where a call was served (the engine's Disposition).
type Disp uint8

const (
	LKL Disp = iota
	Host
	Emulated
)

// Action is what the engine does with a Result.
type Action uint8

const (
	// Return answers the call with Val or Errno.
	Return Action = iota
	// Native serves the call on the guest's own end, as for any host
	// socket of the guest.
	Native
	// Answered: the call was answered already (Call.AddFDReply).
	Answered
	// Deferred: the call is answered later (Call.Defer).
	Deferred
)

// Result is the package's answer to a Req.
type Result struct {
	Action Action
	Disp   Disp
	Val    int64
	Errno  unix.Errno
}

func ok(v int64, d Disp) Result                  { return Result{Val: v, Disp: d} }
func answered(v int64, d Disp) Result            { return Result{Action: Answered, Val: v, Disp: d} }
func deferred(d Disp) Result                     { return Result{Action: Deferred, Disp: d} }
func errno(en unix.Errno, d Disp) Result         { return Result{Errno: en, Disp: d} }
func fail(err error, d Disp) Result              { return errno(sysabi.Errno(err), d) }
func native() Result                             { return Result{Action: Native, Disp: Host} }
func (n *Net) late(answer func())                { n.engine().Late(answer) }
func (n *Net) intrErrno(timeout bool) unix.Errno { return n.engine().IntrErrno(timeout) }

// engineBox holds the engine in Net.eng.
type engineBox struct{ Engine }

// Attach gives n the engine its goroutines answer through (the first one
// given is kept).
func (n *Net) Attach(e Engine) {
	if n.eng.Load() == nil {
		n.eng.CompareAndSwap(nil, &engineBox{e})
	}
}

// engine is the engine attached (Attach); nil before.
func (n *Net) engine() Engine {
	if b := n.eng.Load(); b != nil {
		return b.Engine
	}
	return nil
}

// Reader reads guest memory.
type Reader interface {
	Read(addr uint64, b []byte) error
}

// ReadAddr copies a guest sockaddr of alen bytes at addr for LKL (EINVAL
// above sockaddr_storage, EFAULT).
func ReadAddr(g Reader, addr, alen uint64) ([]byte, unix.Errno) {
	n := int64(int32(alen))
	if n < 0 || n > sysabi.SockaddrStorage {
		return nil, unix.EINVAL
	}
	b := make([]byte, max(n, 1))
	if n > 0 {
		if err := g.Read(addr, b[:n]); err != nil {
			return nil, unix.EFAULT
		}
	}
	return b[:n], 0
}
