//go:build linux && amd64 && cgo

package trap

import (
	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// transport are the syscalls the tier answers itself, before the engine:
// what a program inside kbox's process needs to stay apart from kbox (the
// memory guard, fds made by the host kernel, thread and process state the
// host kernel would apply to kbox) and the emulated signals. The table
// says which and why (dispatch's InProc: OwnMemory, OwnFD, OwnProcess,
// OwnSignal; TestTransportFollowsTable); here is how. Each returns true
// when it answered. Everything else goes to the engine.
var transport = func() []func(th *thread, a *[6]uint64) bool {
	t := make([]func(*thread, *[6]uint64) bool, 512)
	t[unix.SYS_MMAP] = sysMmap                          // mmap
	t[unix.SYS_MUNMAP] = sysMunmap                      // munmap
	t[unix.SYS_MPROTECT] = sysMprotect                  // mprotect
	t[unix.SYS_PKEY_MPROTECT] = sysMprotect             // pkey_mprotect
	t[unix.SYS_MADVISE] = sysMadvise                    // madvise
	t[unix.SYS_MREMAP] = sysMremap                      // mremap
	t[unix.SYS_BRK] = sysBrk                            // brk
	t[unix.SYS_REMAP_FILE_PAGES] = refuse(unix.EPERM)   // remap_file_pages
	t[unix.SYS_RT_SIGACTION] = sysRtSigaction           // rt_sigaction
	t[unix.SYS_RT_SIGPROCMASK] = sysRtSigprocmask       // rt_sigprocmask
	t[unix.SYS_RT_SIGRETURN] = sysRtSigreturn           // rt_sigreturn
	t[unix.SYS_SIGALTSTACK] = sysSigaltstack            // sigaltstack
	t[unix.SYS_RT_SIGSUSPEND] = sysRtSigsuspend         // rt_sigsuspend
	t[unix.SYS_RT_SIGTIMEDWAIT] = sysRtSigtimedwait     // rt_sigtimedwait
	t[unix.SYS_RT_SIGPENDING] = sysRtSigpending         // rt_sigpending
	t[unix.SYS_RT_SIGQUEUEINFO] = sysRtSigqueueinfo     // rt_sigqueueinfo
	t[unix.SYS_RT_TGSIGQUEUEINFO] = sysRtTgsigqueueinfo // rt_tgsigqueueinfo
	t[unix.SYS_KILL] = sysKill                          // kill
	t[unix.SYS_TKILL] = sysTkill                        // tkill
	t[unix.SYS_TGKILL] = sysTgkill                      // tgkill
	t[unix.SYS_SIGNALFD] = refuse(unix.EINVAL)          // signalfd: signals are emulated
	t[unix.SYS_SIGNALFD4] = refuse(unix.EINVAL)         // signalfd4
	t[unix.SYS_EXIT] = sysExit                          // exit
	t[unix.SYS_ARCH_PRCTL] = sysArchPrctl               // arch_prctl
	t[unix.SYS_PRCTL] = sysPrctl                        // prctl
	t[unix.SYS_SECCOMP] = refuse(unix.EPERM)            // seccomp: the thread's filter is kbox's
	t[unix.SYS_SET_TID_ADDRESS] = sysSetTidAddress      // set_tid_address
	t[unix.SYS_GETRLIMIT] = sysGetrlimit                // getrlimit
	t[unix.SYS_WAIT4] = refuse(unix.ECHILD)             // wait4: the guest has no children
	t[unix.SYS_WAITID] = refuse(unix.ECHILD)            // waitid
	t[unix.SYS_PIPE] = sysPipe                          // pipe
	t[unix.SYS_PIPE2] = sysPipe                         // pipe2
	t[unix.SYS_SOCKETPAIR] = sysSocketpair              // socketpair
	t[unix.SYS_EVENTFD] = nativeFD                      // eventfd
	t[unix.SYS_EVENTFD2] = nativeFD                     // eventfd2
	t[unix.SYS_EPOLL_CREATE] = nativeFD                 // epoll_create
	t[unix.SYS_EPOLL_CREATE1] = nativeFD                // epoll_create1
	t[unix.SYS_TIMERFD_CREATE] = nativeFD               // timerfd_create
	t[unix.SYS_MEMFD_CREATE] = nativeFD                 // memfd_create
	t[unix.SYS_IO_SETUP] = refuse(unix.ENOSYS)          // io_setup: maps a ring kbox does not track
	t[unix.SYS_IO_DESTROY] = refuse(unix.EINVAL)        // io_destroy
	t[unix.SYS_IO_SUBMIT] = refuse(unix.EINVAL)         // io_submit
	t[unix.SYS_IO_CANCEL] = refuse(unix.EINVAL)         // io_cancel
	t[unix.SYS_IO_GETEVENTS] = refuse(unix.EINVAL)      // io_getevents
	t[unix.SYS_IO_PGETEVENTS] = refuse(unix.EINVAL)     // io_pgetevents
	t[unix.SYS_CLONE] = sysClone                        // clone
	t[unix.SYS_CLONE3] = refuse(unix.ENOSYS)            // clone3: libc falls back to clone
	t[unix.SYS_FORK] = sysFork                          // fork
	t[unix.SYS_VFORK] = sysFork                         // vfork
	return t
}()

func refuse(en unix.Errno) func(*thread, *[6]uint64) bool {
	return func(th *thread, a *[6]uint64) bool {
		th.fail(en)
		return true
	}
}

// native runs the syscall on the host, in kbox mode on the guest's thread.
func native(nr int, a *[6]uint64) (uint64, unix.Errno) {
	r, _, en := unix.Syscall6(uintptr(nr), uintptr(a[0]), uintptr(a[1]), uintptr(a[2]), uintptr(a[3]), uintptr(a[4]), uintptr(a[5]))
	return uint64(r), en
}

// Memory guard: the guest changes only its own mappings (regions.go).

const (
	mapFixed          = 0x10
	mapAnonymous      = 0x20
	mapFixedNoreplace = 0x100000
	mremapFixed       = 2
	mremapMaymove     = 1
	mremapDontunmap   = 4
)

// guestRange checks [addr, addr+n) is page-aligned guest memory.
func guestRange(addr, n uint64) bool {
	if addr%pageSize != 0 {
		return false
	}
	end := pageUp(addr + n)
	if end == 0 || addr+n < addr {
		return false
	}
	return tr.mem.contains(addr, end)
}

func sysMmap(th *thread, a *[6]uint64) bool {
	t := tr
	flags := a[3]
	var virtual *dispatch.Proc // the guest's, when the fd is a virtual one
	if flags&mapAnonymous == 0 {
		if fd := int(int32(a[4])); !t.fds.open(fd) {
			// kbox's own fds are not the guest's; a virtual fd maps
			// its file's window (dispatch.MapWindow).
			virtual = t.eng.Lookup(th.tid)
			if virtual == nil || !virtual.FDs.IsVirtual(fd) {
				th.fail(unix.EBADF)
				return true
			}
		}
	}
	if flags&mapFixed != 0 && flags&mapFixedNoreplace == 0 && !guestRange(a[0], a[1]) {
		th.guardNote("mmap MAP_FIXED", a[0], a[1])
		th.fail(unix.EPERM)
		return true
	}
	if t.wxRefused(a[2]) {
		th.fail(unix.EACCES)
		return true
	}
	if virtual != nil {
		hfd, en := t.eng.MapWindow(virtual, int(int32(a[4])), a[5], a[1])
		if en != 0 {
			th.fail(en)
			return true
		}
		w := *a
		w[4] = uint64(hfd)
		a = &w
		defer unix.Close(hfd)
	}
	r, en := native(unix.SYS_MMAP, a)
	if en != 0 {
		th.fail(en)
		return true
	}
	if flags&mapFixed != 0 {
		t.rwForget(r, pageUp(r+a[1]), false, true) // code replaced
	}
	t.mem.add(r, pageUp(r+a[1]))
	th.ret(int64(r))
	return true
}

func sysMunmap(th *thread, a *[6]uint64) bool {
	if a[1] == 0 || a[0]%pageSize != 0 {
		th.fail(unix.EINVAL)
		return true
	}
	if !guestRange(a[0], a[1]) {
		th.guardNote("munmap", a[0], a[1])
		th.fail(unix.EPERM)
		return true
	}
	tr.mem.removing(a[0], pageUp(a[0]+a[1]))
	_, en := native(unix.SYS_MUNMAP, a)
	if en == 0 {
		tr.mem.remove(a[0], pageUp(a[0]+a[1]))
		tr.rwForget(a[0], pageUp(a[0]+a[1]), false, true)
	}
	th.ret(-int64(en))
	return true
}

func sysMprotect(th *thread, a *[6]uint64) bool {
	if a[0]%pageSize != 0 {
		th.fail(unix.EINVAL)
		return true
	}
	if a[1] != 0 && !guestRange(a[0], a[1]) {
		th.guardNote("mprotect", a[0], a[1])
		th.fail(unix.EPERM)
		return true
	}
	if tr.wxRefused(a[2]) {
		th.fail(unix.EACCES)
		return true
	}
	_, en := native(int(th.k.Nr), a)
	if en == 0 && a[1] != 0 {
		// Code whose protection changes is new code: it traps again,
		// and may be patched again later.
		tr.rwForget(a[0], pageUp(a[0]+a[1]), true, false)
	}
	th.ret(-int64(en))
	return true
}

func sysMadvise(th *thread, a *[6]uint64) bool {
	if a[1] != 0 && !guestRange(a[0], a[1]) {
		th.guardNote("madvise", a[0], a[1])
		th.fail(unix.EPERM)
		return true
	}
	_, en := native(unix.SYS_MADVISE, a)
	th.ret(-int64(en))
	return true
}

func sysMremap(th *thread, a *[6]uint64) bool {
	t := tr
	old, oldLen, newLen, flags, naddr := a[0], a[1], a[2], a[3], a[4]
	if !guestRange(old, max(oldLen, 1)) {
		th.guardNote("mremap", old, oldLen)
		th.fail(unix.EPERM)
		return true
	}
	if flags&mremapFixed != 0 && !guestRange(naddr, newLen) {
		th.guardNote("mremap MREMAP_FIXED", naddr, newLen)
		th.fail(unix.EPERM)
		return true
	}
	if flags&mremapDontunmap == 0 {
		t.mem.removing(old, pageUp(old+oldLen))
	}
	r, en := native(unix.SYS_MREMAP, a)
	if en != 0 {
		th.fail(en)
		return true
	}
	if flags&mremapDontunmap == 0 && oldLen != 0 {
		t.mem.remove(old, pageUp(old+oldLen))
		t.rwForget(old, pageUp(old+oldLen), false, true)
	}
	t.mem.add(r, pageUp(r+newLen))
	th.ret(int64(r))
	return true
}

func sysBrk(th *thread, a *[6]uint64) bool {
	b := tr.brk()
	if b == nil {
		th.fail(unix.ENOMEM)
		return true
	}
	th.ret(int64(b.Set(uintptr(a[0]))))
	return true
}

// guardNote reports a refused memory change once per run (with -v, each).
func (th *thread) guardNote(what string, addr, n uint64) {
	tr.note("guard:"+what, "trap tier: the guest's "+what+" of memory that is not its own was refused (EPERM)")
}

// Fds the host kernel makes for the guest land above the guest's range
// (every free number below it holds a placeholder): they are moved down.

func nativeFD(th *thread, a *[6]uint64) bool {
	r, en := native(int(th.k.Nr), a)
	if en != 0 {
		th.fail(en)
		return true
	}
	fd, err := tr.fds.move(int(r))
	if err != nil {
		th.fail(sysabi.ErrnoOr(err, unix.EMFILE))
		return true
	}
	th.ret(int64(fd))
	return true
}

// pairFDs runs pipe/pipe2/socketpair into kbox's memory and gives the
// guest the pair moved into its range at out.
func pairFDs(th *thread, nr int, a [6]uint64, out uint64) bool {
	fds, en := nativePair(nr, a, outArg(nr))
	if en != 0 {
		th.fail(en)
		return true
	}
	var got [2]int32
	for i := range fds {
		fd, err := tr.fds.move(int(fds[i]))
		if err != nil {
			if i == 1 {
				tr.fds.release(int(got[0]))
			} else {
				unix.Close(int(fds[1]))
			}
			th.fail(sysabi.ErrnoOr(err, unix.EMFILE))
			return true
		}
		got[i] = int32(fd)
	}
	if writeMem(&tr.mem, out, bytesOf(&got)) != nil {
		tr.fds.release(int(got[0]))
		tr.fds.release(int(got[1]))
		th.fail(unix.EFAULT)
		return true
	}
	th.ret(0)
	return true
}

func outArg(nr int) int {
	if nr == unix.SYS_SOCKETPAIR {
		return 3
	}
	return 0
}

func sysPipe(th *thread, a *[6]uint64) bool {
	return pairFDs(th, int(th.k.Nr), *a, a[0])
}

func sysSocketpair(th *thread, a *[6]uint64) bool {
	return pairFDs(th, unix.SYS_SOCKETPAIR, *a, a[3])
}

// Thread and process state.

func sysArchPrctl(th *thread, a *[6]uint64) bool {
	switch a[0] {
	case 0x1002: // ARCH_SET_FS
		if a[1] >= maxAddr {
			th.fail(unix.EPERM)
			return true
		}
		th.k.FSGuest = a[1]
		th.ret(0)
	case 0x1003: // ARCH_GET_FS
		if writeU64(&tr.mem, a[1], th.k.FSGuest) != nil {
			th.fail(unix.EFAULT)
			return true
		}
		th.ret(0)
	default:
		th.fail(unix.EINVAL) // GS is the C core's; CPUID faulting is kbox's
	}
	return true
}

// sysPrctl lets through what names or reads the calling thread; what
// would change kbox's process (dumpable, no_new_privs, seccomp, the
// parent-death signal, the subreaper) is refused.
func sysPrctl(th *thread, a *[6]uint64) bool {
	switch a[0] {
	case unix.PR_SET_NAME, unix.PR_GET_NAME, unix.PR_GET_DUMPABLE, unix.PR_GET_NO_NEW_PRIVS,
		unix.PR_GET_TIMERSLACK, unix.PR_SET_TIMERSLACK, unix.PR_CAPBSET_READ, unix.PR_GET_SECUREBITS,
		unix.PR_GET_THP_DISABLE, unix.PR_SET_VMA:
		r, en := native(unix.SYS_PRCTL, a)
		if en != 0 {
			th.fail(en)
		} else {
			th.ret(int64(r))
		}
	case unix.PR_GET_SECCOMP:
		th.ret(0)
	default:
		th.fail(unix.EINVAL)
	}
	return true
}

func sysSetTidAddress(th *thread, a *[6]uint64) bool {
	th.ctid = a[0]
	th.ret(int64(th.tid))
	return true
}

func sysGetrlimit(th *thread, a *[6]uint64) bool {
	if a[0] == unix.RLIMIT_NOFILE {
		g := uint64(tr.fds.g)
		lim := [2]uint64{g, g}
		if writeMem(&tr.mem, a[1], bytesOf(&lim)) != nil {
			th.fail(unix.EFAULT)
			return true
		}
		th.ret(0)
		return true
	}
	lim, en := nativeRlimit(a[0])
	if en != 0 {
		th.fail(en)
		return true
	}
	if writeMem(&tr.mem, a[1], bytesOf(&lim)) != nil {
		th.fail(unix.EFAULT)
		return true
	}
	th.ret(0)
	return true
}

// fork and non-thread clone: a second process cannot share kbox's; the
// trap tier refuses them (kbox's auto mode runs such programs in the
// seccomp tier).
func sysFork(th *thread, a *[6]uint64) bool {
	tr.note("fork", "trap tier: the guest tried to start a process (fork/vfork/clone); this tier runs one process: use --syscall-mode=seccomp")
	th.fail(unix.ENOSYS)
	return true
}
