package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

func init() {
	register(unix.SYS_UNAME, sysUname)                 // uname(2): the LKL kernel's identity
	register(unix.SYS_SETHOSTNAME, sysSethostname)     // sethostname(2): LKL's name
	register(unix.SYS_SETDOMAINNAME, sysSetdomainname) // setdomainname(2): LKL's name
	register(unix.SYS_PRLIMIT64, sysPrlimit)           // prlimit64(2): fd limit clamped
	register(unix.SYS_SETRLIMIT, sysSetrlimit)         // setrlimit(2): fd limit clamped
	register(unix.SYS_EXIT_GROUP, sysExitGroup)        // exit_group(2): write back, forget
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

// The guest's UTS names (uname's nodename and domainname) are LKL's: uname
// reports them, sethostname and setdomainname change them (never the
// host's), and /proc/sys/kernel/hostname and domainname are LKL's files
// (utsProcFile). At start LKL's hostname is set from the image's
// /etc/hostname, as a booted system's init does (InitLKL).

// utsNameMax is __NEW_UTS_LEN.
const utsNameMax = 64

func sysSethostname(e *Engine, r *Request) Result { return e.setUTS(r, lkl.SysSethostname) }

func sysSetdomainname(e *Engine, r *Request) Result { return e.setUTS(r, lkl.SysSetdomainname) }

// setUTS serves sethostname and setdomainname in LKL, with Linux's checks
// in Linux's order: CAP_SYS_ADMIN, then the length, then the memory.
func (e *Engine) setUTS(r *Request, nr uintptr) Result {
	if !e.guestAdmin(r) {
		return errno(unix.EPERM, Emulated)
	}
	n := int64(int32(r.Args[1]))
	if n < 0 || n > utsNameMax {
		return errno(unix.EINVAL, Emulated)
	}
	b := make([]byte, n+1) // LKL reads n bytes; never an empty slice
	if err := r.G.Read(r.Args[0], b[:n]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	if _, le := lkl.Syscall6(nr, uptr(b), uintptr(n), 0, 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	return ok(0, LKL)
}

// capSysAdmin is CAP_SYS_ADMIN's bit.
const capSysAdmin = 21

// guestAdmin reports whether the calling guest may change the UTS names:
// Linux requires CAP_SYS_ADMIN, which the guest's credentials (cred.go)
// have or not.
func (e *Engine) guestAdmin(r *Request) bool {
	c := r.P.creds()
	return c.Has(capSysAdmin)
}

// utsProcFile reports the /proc files of the UTS names, served from LKL's
// own proc (mounted by the recommended mounts) so that they agree with
// uname. Without a proc mounted in LKL they stay the host's.
func utsProcFile(abs string) bool {
	if abs != "/proc/sys/kernel/hostname" && abs != "/proc/sys/kernel/domainname" {
		return false
	}
	var st lkl.Stat64
	return lklStatUncached(abs, false, &st) == 0
}

// openUTS opens a UTS name file of LKL's proc as a virtual fd (a sysctl
// file has no size to copy into a shadow). Writing one needs what
// sethostname needs.
func (e *Engine) openUTS(r *Request, t Target, flags int) Result {
	if flags&unix.O_ACCMODE != unix.O_RDONLY && !e.guestAdmin(r) {
		return errno(unix.EACCES, Emulated)
	}
	lflags := int(lkl.OpenFlagsToLKL(uint32(flags&^unix.O_CLOEXEC))) | unix.O_CLOEXEC
	fd, le := lklPath(lkl.SysOpenat, 1, t.Path, [6]uintptr{atFdcwd, 0, uintptr(lflags)})
	if le != 0 {
		return errno(le, LKL)
	}
	gfd, err := r.P.FDs.Open(int(fd), t.Path, flags, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, LKL)
	}
	return ok(int64(gfd), LKL)
}

// InitLKL readies the booted kernel for guests, once, before the first:
// its umask is 0, since kbox applies each guest process's own (umask.go),
// and its hostname is the image's (initUTS).
func InitLKL() {
	lklUmaskZero()
	initUTS()
}

// initUTS sets LKL's hostname from the image's /etc/hostname (its first
// line, if it is a valid name), as a booted system's init would; without
// one the name stays the kernel's default, "(none)".
func initUTS() {
	b, err := lkl.ReadFile("/etc/hostname")
	if err != nil {
		return
	}
	name, _, _ := strings.Cut(string(b), "\n")
	name = strings.TrimSpace(name)
	if name == "" || len(name) > utsNameMax || strings.ContainsAny(name, " \t\x00") {
		return
	}
	c := []byte(name)
	lkl.Syscall6(lkl.SysSethostname, uptr(c), uintptr(len(c)), 0, 0, 0, 0)
}

// The virtual fd range starts at Opt.VirtualFDs: the guest's soft fd limit,
// by which the kernel allocates fds, must stay at or below it, so that the
// kernel never hands out a host fd in the virtual range. The hard limit is
// the host's (seccomp/supervisor/guestinit.c).
func (e *Engine) nofileOK(r *Request, addr uint64) bool {
	if addr == 0 {
		return true
	}
	var lim unix.Rlimit
	if err := r.G.Read(addr, asBytes(&lim)); err != nil {
		return true // the kernel reports the EFAULT
	}
	return lim.Cur <= uint64(e.Opt.VirtualFDs)
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
