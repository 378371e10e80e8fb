// The file family: record locks and flock on virtual fds (FamFile in
// table.go).

package dispatch

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// A virtual fd's file (above KBOX_SHADOW_MAX, or a directory) is LKL's,
// and LKL's locks would all be kbox's: one owner for every guest. So the
// host's lock tables stand in for it. Each LKL inode a guest locks has a
// proxy: an empty memfd of kbox's ("kbox-lock:PATH"), one host inode for
// the file. In the seccomp tier a lock call (fcntl's F_SETLK, F_SETLKW,
// F_GETLK and their OFD forms, flock) on virtual fd N puts a description
// of the proxy at the guest's host fd N, opened with the fd's access mode
// (a write lock needs a writable fd), and lets the call run there: the
// guest's own process owns its POSIX locks, its description its OFD and
// flock locks, F_SETLKW waits in the guest, F_GETLK names the holder's
// pid, and a process's exit or its close of any fd of the file (close(N)
// goes on to the host's) drops its POSIX locks, as on Linux. Another
// virtual fd of the same open file in the process shares the first's
// description. The in-process tiers, one process that is kbox's, take
// POSIX locks on the proxy itself and drop them all at a close of the
// file's fd.
//
// A close of another virtual fd M of a file with a proxy puts a
// description of the proxy at M first, then goes on to the host's close
// too (closeDropsLocks).
//
// A dup2 or dup3 onto a virtual fd of such a file replaces the proxy's
// description at the guest's host fd with an empty window, which drops
// them too (dupDropsLocks).
//
// Not exact: an exec that keeps N after F_SETFD changed its close-on-exec
// flag leaves the proxy's description at N until the process closes N or
// exits; N then cannot be mapped (ENODEV: replacing the description would
// drop the locks).

// lockName begins the names of the lock proxies (then the file's path).
const lockName = "kbox-lock:"

// maxProxies bounds the lock proxies kbox keeps (one host fd each):
// beyond it, a lock on a new file is ENOLCK.
const maxProxies = 1024

// lockProxies are the proxies by LKL inode.
type lockProxies struct {
	mu  sync.Mutex
	m   map[[2]uint64]proxy
	any atomic.Bool // len(m) > 0
}

// proxy is kbox's fd of one proxy and its host device and inode.
type proxy struct {
	fd       int
	dev, ino uint64
}

// lockProxy returns the proxy of the LKL file of virtual fd fd, made if
// there is none and create is set (else the zero proxy).
func (e *Engine) lockProxy(fd int, p *Proc, create bool) (proxy, unix.Errno) {
	ent, open := p.FDs.Get(fd)
	if !open {
		return proxy{}, unix.EBADF
	}
	st, err := lkl.Fstat(ent.File.LKLFd)
	if err != nil {
		return proxy{}, sysabi.Errno(err)
	}
	s := &e.locks
	s.mu.Lock()
	defer s.mu.Unlock()
	key := [2]uint64{st.Dev, st.Ino}
	if x, found := s.m[key]; found || !create {
		return x, 0
	}
	if len(s.m) >= maxProxies {
		return proxy{}, unix.ENOLCK
	}
	mfd, err := unix.MemfdCreate(memfdName(lockName, ent.File.Path), unix.MFD_CLOEXEC)
	if err != nil {
		return proxy{}, sysabi.Errno(err)
	}
	var hst unix.Stat_t
	if err := unix.Fstat(mfd, &hst); err != nil {
		unix.Close(mfd)
		return proxy{}, sysabi.Errno(err)
	}
	if s.m == nil {
		s.m = map[[2]uint64]proxy{}
	}
	x := proxy{fd: mfd, dev: hst.Dev, ino: hst.Ino}
	s.m[key] = x
	s.any.Store(true)
	return x, 0
}

// lockable reports whether virtual fd fd's lock calls are the proxy's: a
// file of LKL's (not a host file kbox keeps, nor a listing of kbox's).
func lockable(r *Request, fd int) bool {
	ent, open := r.P.FDs.Get(fd)
	return open && !ent.File.Host && ent.File.Listing == nil
}

// lockAt serves a lock call on virtual fd fd of a seccomp guest: the
// proxy's description goes at the guest's host fd fd (unless it is there
// already), and the call runs on the host.
func (e *Engine) lockAt(r *Request, fd int) Result {
	x, en := e.lockProxy(fd, r.P, true)
	if en != 0 {
		return errno(en, Emulated)
	}
	if e.proxyAt(r, fd, x) {
		return cont
	}
	ent, _ := r.P.FDs.Get(fd)
	d := -1
	nums, ents := r.P.FDs.Fds()
	for i, n := range nums {
		if n != fd && ents[i].File == ent.File && e.proxyAt(r, n, x) {
			// The same open file's description (OFD locks, flock).
			if h, err := r.P.getfd(n); err == nil {
				d = h
			}
			break
		}
	}
	if d < 0 {
		mode := ent.File.Flags & unix.O_ACCMODE
		h, err := unix.Open("/proc/self/fd/"+strconv.Itoa(x.fd), mode|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(err, Host)
		}
		d = h
	}
	defer unix.Close(d)
	if en := AddFDAt(r, d, int32(fd), ent.Cloexec); en != 0 {
		return errno(en, Host)
	}
	e.windows.Store(true)
	return cont
}

// proxyAt reports whether the guest's host fd fd is a description of
// proxy x.
func (e *Engine) proxyAt(r *Request, fd int, x proxy) bool {
	var st unix.Stat_t
	return unix.Stat("/proc/"+strconv.Itoa(r.P.Tgid)+"/fd/"+strconv.Itoa(fd), &st) == nil && st.Dev == x.dev && st.Ino == x.ino
}

// kboxFdAt reports whether the seccomp guest's host fd at virtual fd
// number fd is one kbox put there (a window, sys_mem_map.go, or a lock
// proxy's description): closing the virtual fd then goes on to the
// host's close, which drops it (and, for a proxy, the process's POSIX
// locks on the file, as Linux's close does).
func (e *Engine) kboxFdAt(r *Request, fd int) bool {
	if !e.windows.Load() || r.P.Tgid == kboxPid {
		return false
	}
	l, err := os.Readlink("/proc/" + strconv.Itoa(r.P.Tgid) + "/fd/" + strconv.Itoa(fd))
	return err == nil && (strings.HasPrefix(l, "/memfd:"+mapName) || strings.HasPrefix(l, "/memfd:"+lockName))
}

// closeDropsLocks prepares a seccomp guest's close of virtual fd fd whose
// file has a proxy: a description of the proxy goes at the guest's host
// fd fd (unless one is there), so that the close, continued, drops the
// process's POSIX locks on the file, as Linux's close of any of its fds
// does. It reports whether the close must go on to the host's.
func (e *Engine) closeDropsLocks(r *Request, fd int) bool {
	if !e.locks.any.Load() || r.P.Tgid == kboxPid || !lockable(r, fd) {
		return false
	}
	x, _ := e.lockProxy(fd, r.P, false)
	if x.ino == 0 {
		return false // no guest locked the file
	}
	if e.proxyAt(r, fd, x) {
		return true
	}
	h, err := unix.Open("/proc/self/fd/"+strconv.Itoa(x.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(h)
	return AddFDAt(r, h, int32(fd), true) == 0
}

// dupDropsLocks prepares a dup2 or dup3 onto virtual fd fd, which closes
// fd's file: when a guest locked that file, the process's POSIX locks on
// it go, as Linux's implicit close drops them. In the seccomp tier a
// description of the proxy is put at the guest's host fd fd (unless one
// is there), then replaced by an empty window (a memfd that kboxFdAt
// knows, that a map of fd replaces and its close drops): the
// replacement closes the proxy's description in the guest's own task.
func (e *Engine) dupDropsLocks(r *Request, fd int) {
	if r.P.Tgid == kboxPid {
		e.unlockInProcess(fd, r.P)
		return
	}
	if !e.closeDropsLocks(r, fd) {
		return
	}
	mfd, err := unix.MemfdCreate(mapName, unix.MFD_CLOEXEC)
	if err != nil {
		return
	}
	defer unix.Close(mfd)
	AddFDAt(r, mfd, int32(fd), true)
	e.windows.Store(true)
}

// lockInProcess serves a POSIX lock call (F_SETLK, F_SETLKW, F_GETLK) on
// virtual fd fd in an in-process tier: on the proxy itself, kbox's
// process being the guest's. OFD locks are ENOLCK there.
func (e *Engine) lockInProcess(r *Request, fd, cmd int) Result {
	if cmd != unix.F_SETLK && cmd != unix.F_SETLKW && cmd != unix.F_GETLK {
		return errno(unix.ENOLCK, Emulated)
	}
	ent, _ := r.P.FDs.Get(fd)
	x, en := e.lockProxy(fd, r.P, true)
	if en != 0 {
		return errno(en, Emulated)
	}
	var fl unix.Flock_t
	if err := r.G.Read(r.Args[2], asBytes(&fl)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	// A write lock needs a writable fd, a read lock a readable one.
	mode := ent.File.Flags & unix.O_ACCMODE
	if cmd != unix.F_GETLK && (fl.Type == unix.F_WRLCK && mode == unix.O_RDONLY || fl.Type == unix.F_RDLCK && mode == unix.O_WRONLY) {
		return errno(unix.EBADF, Emulated)
	}
	if err := unix.FcntlFlock(uintptr(x.fd), cmd, &fl); err != nil {
		return fail(err, Host)
	}
	if cmd == unix.F_GETLK {
		if err := r.G.Write(r.Args[2], asBytes(&fl)); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
	}
	return ok(0, Host)
}

// unlockInProcess drops an in-process guest's POSIX locks on the file of
// virtual fd fd, which it is closing (Linux drops them at any close of
// the file's fds).
func (e *Engine) unlockInProcess(fd int, p *Proc) {
	if !e.locks.any.Load() {
		return
	}
	ent, open := p.FDs.Get(fd)
	if !open || ent.File.Host || ent.File.Listing != nil {
		return
	}
	if x, _ := e.lockProxy(fd, p, false); x.fd > 0 {
		fl := unix.Flock_t{Type: unix.F_UNLCK}
		unix.FcntlFlock(uintptr(x.fd), unix.F_SETLK, &fl)
	}
}
