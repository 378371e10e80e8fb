package dispatch

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

func init() {
	register(unix.SYS_UNAME, sysUname)             // uname(2): the LKL kernel's identity
	register(unix.SYS_SETHOSTNAME, sysSethostname) // sethostname(2), in LKL
	register(unix.SYS_SOCKET, sysSocket)           // socket(2): no host networking
	register(unix.SYS_PRLIMIT64, sysPrlimit)       // prlimit64(2): fd limit clamped
	register(unix.SYS_SETRLIMIT, sysSetrlimit)     // setrlimit(2): fd limit clamped
	register(unix.SYS_EXIT_GROUP, sysExitGroup)    // exit_group(2): write back, forget
}

func sysUname(e *Engine, r *Request) Result {
	u, err := lkl.Uname()
	if err != nil {
		return fail(err, LKL)
	}
	if err := r.G.Write(r.Args[0], asBytes(&u)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

func sysSethostname(e *Engine, r *Request) Result {
	n := min(r.Args[1], 64)
	b := make([]byte, n)
	if err := r.G.Read(r.Args[0], b); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	if _, le := lkl.Syscall6(170, uptr(b), uintptr(n), 0, 0, 0, 0); le != 0 { // asm-generic sethostname
		return errno(le, LKL)
	}
	return ok(0, LKL)
}

func sysSocket(e *Engine, r *Request) Result {
	return errno(unix.EAFNOSUPPORT, Denied)
}

// The virtual fd range starts at Opt.VirtualFDs: the guest's host fd limit
// must stay at or below it, so that the kernel never hands out a host fd in
// the virtual range.
func (e *Engine) nofileOK(r *Request, addr uint64) bool {
	if addr == 0 {
		return true
	}
	var lim unix.Rlimit
	if err := r.G.Read(addr, asBytes(&lim)); err != nil {
		return true // the kernel reports the EFAULT
	}
	return lim.Cur <= uint64(e.Opt.VirtualFDs) && lim.Max <= uint64(e.Opt.VirtualFDs)
}

func sysPrlimit(e *Engine, r *Request) Result {
	if r.Args[1] == unix.RLIMIT_NOFILE && !e.nofileOK(r, r.Args[2]) {
		return errno(unix.EPERM, Denied)
	}
	return cont
}

func sysSetrlimit(e *Engine, r *Request) Result {
	if r.Args[0] == unix.RLIMIT_NOFILE && !e.nofileOK(r, r.Args[1]) {
		return errno(unix.EPERM, Denied)
	}
	return cont
}

// sysExitGroup: what the process wrote to shadows is written back (a
// command's output is in the image when it ends), its pumps are flushed
// and its virtual fds closed.
func sysExitGroup(e *Engine, r *Request) Result {
	e.Shadows.FlushDirty()
	e.flushPumps()
	e.adoptChildren(r.P)
	e.Exit(r.P)
	return cont
}
