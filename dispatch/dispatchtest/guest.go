// Package dispatchtest runs dispatch's handlers without a tier: Guest is a
// dispatch.Guest whose memory is a real mapping of the test's own process,
// so the same arguments serve a dispatched call and the native call it is
// compared with, and an fd the engine installs is an fd of the test.
package dispatchtest

import (
	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// Guest is one guest thread: the test process itself, with an arena of
// memory for arguments. It is not safe for concurrent use.
type Guest struct {
	mem  []byte
	base uint64
	next int
	fds  []int
}

// New returns a Guest with size bytes of argument memory.
func New(size int) (*Guest, error) {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	return &Guest{mem: mem, base: addrOf(mem)}, nil
}

// Close closes the fds the engine installed and unmaps the arena.
func (g *Guest) Close() {
	g.CloseFDs()
	unix.Munmap(g.mem)
}

// CloseFDs closes the fds the engine installed so far.
func (g *Guest) CloseFDs() {
	for _, fd := range g.fds {
		unix.Close(fd)
	}
	g.fds = g.fds[:0]
}

// Reset forgets every argument the arena holds.
func (g *Guest) Reset() {
	clear(g.mem[:g.next])
	g.next = 0
}

// Buf returns the address of n zeroed bytes of the arena, 8-aligned.
func (g *Guest) Buf(n int) uint64 {
	at := (g.next + 7) &^ 7
	if at+n > len(g.mem) {
		panic("dispatchtest: arena full")
	}
	g.next = at + n
	return g.base + uint64(at)
}

// Str returns the address of s, NUL-terminated, in the arena.
func (g *Guest) Str(s string) uint64 {
	a := g.Buf(len(s) + 1)
	copy(g.Bytes(a, len(s)), s)
	return a
}

// Bytes returns the n bytes of the arena at addr.
func (g *Guest) Bytes(addr uint64, n int) []byte {
	off := addr - g.base
	return g.mem[off : off+uint64(n)]
}

// Bad is an address outside every mapping: a hostile pointer.
const Bad = 8

func (g *Guest) at(addr uint64, n int) ([]byte, error) {
	if addr < g.base || addr-g.base+uint64(n) > uint64(len(g.mem)) {
		return nil, unix.EFAULT
	}
	return g.Bytes(addr, n), nil
}

// Pid is the test process: /proc/self of the engine is the guest's.
func (g *Guest) Pid() int { return unix.Getpid() }

func (g *Guest) Read(addr uint64, b []byte) error {
	m, err := g.at(addr, len(b))
	if err == nil {
		copy(b, m)
	}
	return err
}

func (g *Guest) ReadSome(addr uint64, b []byte) (int, error) {
	if addr < g.base || addr-g.base >= uint64(len(g.mem)) {
		return 0, unix.EFAULT
	}
	n := min(len(b), len(g.mem)-int(addr-g.base))
	return n, g.Read(addr, b[:n])
}

func (g *Guest) Write(addr uint64, b []byte) error {
	m, err := g.at(addr, len(b))
	if err == nil {
		copy(m, b)
	}
	return err
}

func (g *Guest) WriteForce(addr uint64, b []byte) error { return g.Write(addr, b) }

func (g *Guest) Valid() error { return nil }

// AddFD installs a copy of hostfd in the test process, at target or the
// lowest free fd, as the seccomp tier's addfd does in the guest's.
func (g *Guest) AddFD(hostfd, target int, cloexec bool) (int, error) {
	var fd int
	var err error
	switch {
	case target >= 0:
		flags := 0
		if cloexec {
			flags = unix.O_CLOEXEC
		}
		err = unix.Dup3(hostfd, target, flags)
		fd = target
	case cloexec:
		fd, err = unix.FcntlInt(uintptr(hostfd), unix.F_DUPFD_CLOEXEC, 0)
	default:
		fd, err = unix.FcntlInt(uintptr(hostfd), unix.F_DUPFD, 0)
	}
	if err != nil {
		return -1, err
	}
	g.fds = append(g.fds, fd)
	return fd, nil
}

func (g *Guest) AddFDReply(hostfd int, cloexec bool) (int, error) {
	return g.AddFD(hostfd, -1, cloexec)
}

// Defer is not supported: a handler that defers (a blocking socket call)
// needs a tier.
func (g *Guest) Defer() dispatch.Pending { panic("dispatchtest: a deferred syscall needs a tier") }

// Call is the outcome of one syscall, dispatched or native: its value, or
// its errno.
type Call struct {
	Val   int64
	Errno unix.Errno
}

// Dispatch serves r through e with g as its guest, as the seccomp tier
// would: a call on a host fd that the table lets run on the host (HostFD,
// and close) runs natively without reaching the engine, and so does a call
// the engine continues.
func (g *Guest) Dispatch(e *dispatch.Engine, r *dispatch.Request) Call {
	r.G = g
	if fd := int(int32(r.Args[0])); fd >= 0 && fd < e.Opt.VirtualFDs && onHost(r) {
		c := Native(r.Nr, r.Args)
		if r.Nr == unix.SYS_CLOSE && c.Errno == 0 {
			g.forget(fd)
		}
		return c
	}
	res := e.Dispatch(r)
	switch res.Action {
	case dispatch.Continue:
		return Native(r.Nr, r.Args)
	case dispatch.Deferred:
		panic("dispatchtest: deferred")
	}
	if res.Errno != 0 {
		return Call{Val: -1, Errno: res.Errno}
	}
	return Call{Val: res.Val}
}

// onHost reports whether the seccomp tier's filter runs r on the host
// when its first argument is a host fd.
func onHost(r *dispatch.Request) bool {
	s := dispatch.Lookup(r.Nr)
	if s.Facts&dispatch.FilterHostFD != 0 {
		return true // close
	}
	return s.How == dispatch.HostFD && (s.Facts&dispatch.AddrArg4 == 0 || r.Args[4] == 0)
}

// forget drops fd from the fds Close closes: the guest closed it.
func (g *Guest) forget(fd int) {
	for i, f := range g.fds {
		if f == fd {
			g.fds = append(g.fds[:i], g.fds[i+1:]...)
			return
		}
	}
}

// Native runs syscall nr with args on the host.
func Native(nr int, a [6]uint64) Call {
	r, _, en := unix.Syscall6(uintptr(nr), uintptr(a[0]), uintptr(a[1]), uintptr(a[2]), uintptr(a[3]), uintptr(a[4]), uintptr(a[5]))
	if en != 0 {
		return Call{Val: -1, Errno: en}
	}
	return Call{Val: int64(r)}
}
