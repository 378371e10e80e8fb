// The proc family's calls about the system: uname, rlimits, sysinfo, host
// and domain names, exit_group (FamProc in table.go).

package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// sysUname serves uname(2): LKL's identity on the host's machine.
func sysUname(e *Engine, r *Request) Result {
	u, err := lkl.Uname()
	if err != nil {
		return fail(err, LKL)
	}
	// LKL's machine is "lkl"; the guest's programs are the host's
	// architecture's, and scripts, package managers and LTP's compat
	// check read it from here.
	u.Machine = hostMachine
	if err := r.G.Write(r.Args[0], asBytes(&u)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// hostMachine is the host's uname machine (x86_64, aarch64): the
// guest's architecture.
var hostMachine = func() (m [65]byte) {
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m = u.Machine
	}
	return m
}()

// The guest's UTS names (uname's nodename and domainname) are LKL's: uname
// reports them, sethostname and setdomainname change them (never the
// host's), and /proc/sys/kernel/hostname and domainname are LKL's files
// (package procfs). At start LKL's hostname is set from the image's
// /etc/hostname, as a booted system's init does (InitLKL).

// utsNameMax is __NEW_UTS_LEN.
const utsNameMax = 64

// sysSethostname serves sethostname(2): LKL's name.
func sysSethostname(e *Engine, r *Request) Result { return e.setUTS(r, lkl.SysSethostname) }

// sysSetdomainname serves setdomainname(2): LKL's name.
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

// InitLKL readies the booted kernel for guests, once, before the first:
// its umask is 0, since kbox applies each guest process's own (proc.go),
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
// kernel never hands out a host fd in the virtual range. The guest sees
// that base as its hard limit too (nofileView), as in the in-process
// tiers: a program that raises its soft limit to its hard one, as many
// servers and Python tools do at start, then gets what it asked for, not
// EPERM. The host process's real hard limit stays above the virtual range
// (an execveat by a virtual fd installs there: seccomp/supervisor/exec.go).

// nofileCheck is the errno of setting RLIMIT_NOFILE to the limits at addr
// (0: none given), or 0 to let the call go on: raising the hard limit
// above the guest's (the virtual base) is EPERM, as raising a hard limit
// is for a process without CAP_SYS_RESOURCE.
func (e *Engine) nofileCheck(r *Request, addr uint64) unix.Errno {
	if addr == 0 {
		return 0
	}
	var lim unix.Rlimit
	if err := r.G.Read(addr, asBytes(&lim)); err != nil {
		return 0 // the kernel reports the EFAULT
	}
	if lim.Cur > lim.Max {
		return 0 // the kernel's EINVAL
	}
	if lim.Max > uint64(e.Opt.VirtualFDs) {
		return unix.EPERM
	}
	return 0
}

// nofileView writes the calling process's RLIMIT_NOFILE as the guest sees
// it to addr: both limits at most the virtual base.
func (e *Engine) nofileView(r *Request, addr uint64) Result {
	var lim unix.Rlimit
	if err := unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		return fail(err, Host)
	}
	return e.writeNofile(r, addr, lim)
}

// writeNofile writes real limits lim to addr as the guest sees them.
func (e *Engine) writeNofile(r *Request, addr uint64, lim unix.Rlimit) Result {
	base := uint64(e.Opt.VirtualFDs)
	lim.Cur, lim.Max = min(lim.Cur, base), min(lim.Max, base)
	if err := r.G.Write(addr, asBytes(&lim)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(0, Emulated)
}

// sysGetrlimit serves getrlimit(2): the fd limit as the guest sees it.
func sysGetrlimit(e *Engine, r *Request) Result {
	if r.Args[0] == unix.RLIMIT_NOFILE {
		return e.nofileView(r, r.Args[1])
	}
	return cont
}

// sysPrlimit serves prlimit64(2): the fd limit as the guest sees it.
func sysPrlimit(e *Engine, r *Request) Result {
	if res := e.taskTarget(int32(r.Args[0])); res.Action != Continue {
		return res // another host process's limits
	}
	switch {
	case r.Args[1] != unix.RLIMIT_NOFILE:
		return cont
	case r.Args[0] == 0 && r.Args[2] == 0 && r.Args[3] != 0:
		return e.nofileView(r, r.Args[3]) // a read of its own: getrlimit's way in glibc and musl
	case r.Args[0] == 0 && r.Args[2] != 0:
		return e.nofileSet(r, r.Args[2], r.Args[3])
	}
	// Another guest process's limits: the kernel sets them, within the
	// base.
	if en := e.nofileCheck(r, r.Args[2]); en != 0 {
		return errno(en, Denied)
	}
	return cont
}

// sysSetrlimit serves setrlimit(2): the fd limit as the guest sees it.
func sysSetrlimit(e *Engine, r *Request) Result {
	if r.Args[0] == unix.RLIMIT_NOFILE {
		return e.nofileSet(r, r.Args[1], 0)
	}
	return cont
}

// ExecFDs is the lowest hard fd limit that lets the seccomp tier install
// a program the guest execs: its fds are the three just below it
// (seccomp/supervisor/exec.go: ExecFD, InterpFD and a script's LoaderFD).
const ExecFDs = 1003

// nofileSet sets the calling process's RLIMIT_NOFILE to the limits at
// addr (checked: nofileCheck), writing the old ones as the guest sees them
// to old (0: none). The soft limit is the guest's; the hard one is never
// set below ExecFDs: kbox installs every program the guest execs at fds
// 1000 to 1002, above a soft limit it raises for that moment, and with a
// hard limit lowered under them (ulimit -n 256 sets both) every exec
// failed with EBADF. The guest then reads a hard limit of ExecFDs where
// it set less. In the in-process tiers the guest's process is kbox's:
// their transport keeps the guest's limit (cont).
func (e *Engine) nofileSet(r *Request, addr, old uint64) Result {
	if r.P.Tgid == kboxPid {
		if en := e.nofileCheck(r, addr); en != 0 {
			return errno(en, Denied)
		}
		return cont
	}
	var lim, was unix.Rlimit
	if err := r.G.Read(addr, asBytes(&lim)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	if lim.Cur > lim.Max {
		return errno(unix.EINVAL, Emulated)
	}
	if err := unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, nil, &was); err != nil {
		return fail(err, Host)
	}
	if lim.Max > min(was.Max, uint64(e.Opt.VirtualFDs)) {
		return errno(unix.EPERM, Denied) // above the hard limit it reads
	}
	lim.Max = min(max(lim.Max, ExecFDs), was.Max)
	if err := unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		return fail(err, Host)
	}
	if old != 0 {
		return e.writeNofile(r, old, was)
	}
	return ok(0, Emulated)
}

// sysExitGroup serves exit_group(2): write-back, pumps flushed, virtual fds closed.
func sysExitGroup(e *Engine, r *Request) Result {
	// What the process wrote to shadows is written back (a command's output
	// is in the image when it ends), its pumps are flushed and its virtual
	// fds closed.
	e.Shadows.FlushDirty()
	e.flushPumps()
	e.adoptChildren(r.P)
	e.Exit(r.P)
	return cont
}

// sysSysinfo serves sysinfo(2) as the guest's /proc would answer it.
func sysSysinfo(e *Engine, r *Request) Result {
	// Memory and swap are the host's (truthful, for programs that size
	// themselves), the load averages are LKL's, which runs the guest's file
	// work (the host's load is other tenants'), the uptime is the host's, as
	// /proc/uptime and the guest's clocks, and procs counts the guest's
	// processes.
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return fail(err, Emulated)
	}
	sc := getScratch() // LKL writes it: heap memory, not the goroutine's stack
	defer putScratch(sc)
	ls := &sc.si
	if _, le := lkl.Syscall6(lkl.SysSysinfo, lkl.PtrOf(ls), 0, 0, 0, 0, 0); le == 0 {
		// The uptime stays the host's, as in /proc/uptime (the guest's
		// clocks and process start times are the host's).
		si.Loads = ls.Loads
	}
	si.Procs = uint16(len(e.Tgids(nil)))
	if err := r.G.Write(r.Args[0], asBytes(&si)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(0, Emulated)
}
