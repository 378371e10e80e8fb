//go:build linux

package trap

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// fdSpace keeps the guest's fds apart from kbox's in the one fd table they
// share. The guest owns [0, G); kbox's own fds are all at G or above: at
// start every free number below G gets a placeholder (a dup of one O_PATH
// fd), so that the kernel, which gives out the lowest free number, never
// gives kbox one below G, and the guest's fd syscalls that BPF lets run
// natively are those on fds below G. Every syscall that makes or frees a
// guest fd is trapped: the new fd is moved to the lowest placeholder
// (dup3 over it), a closed one becomes a placeholder again. The bitmap of
// placeholders is exact: nothing else changes a number below G.
type fdSpace struct {
	g  int // first fd of kbox's range; the guest's RLIMIT_NOFILE
	ph int // the placeholder's own fd (>= g)

	mu   sync.Mutex
	free []bool // free[fd]: fd holds a placeholder
	kbox []bool // kbox[fd]: kbox's own fd below g, open before Prepare
	// lent[fd]: fd holds a description kbox keeps a copy of (lend.go);
	// nlent counts them.
	lent  []lentFD
	nlent int
}

// newFDSpace fills every free number below g with a placeholder. It must
// run before kbox opens anything it keeps (before the kernel boots).
func newFDSpace(g int) (*fdSpace, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return nil, err
	}
	if lim.Cur < lim.Max {
		// The soft limit may always rise to the hard one; kbox's own
		// fds need room above g.
		lim.Cur = lim.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
	if uint64(g)+256 > lim.Cur {
		return nil, fmt.Errorf("the limit on open files (%d) leaves no room above the guest's %d fds", lim.Cur, g)
	}
	// procfs.FreeFdName knows this name: the engine tells a free
	// number by it.
	mfd, err := unix.MemfdCreate("kbox:free-fd", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	path, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", mfd), unix.O_PATH|unix.O_CLOEXEC, 0)
	unix.Close(mfd)
	if err != nil {
		return nil, err
	}
	ph, err := unix.FcntlInt(uintptr(path), unix.F_DUPFD_CLOEXEC, g)
	unix.Close(path)
	if err != nil {
		return nil, err
	}
	s := &fdSpace{g: g, ph: ph, free: make([]bool, g), kbox: make([]bool, g), lent: make([]lentFD, g)}
	// F_DUPFD places a copy at the lowest free number at or above next:
	// each call finds a free number and fills it, one system call a
	// placeholder, and the numbers it passed over are open already. 0,
	// 1 and 2 are the guest's; anything else open now is kbox's (Go's
	// netpoll and cgroup files, what kbox's parent passed): never the
	// guest's to touch.
	for next := 0; next < g; {
		fd, err := unix.FcntlInt(uintptr(ph), unix.F_DUPFD_CLOEXEC, next)
		if err != nil {
			return nil, err
		}
		for ; next < min(fd, g); next++ {
			s.kbox[next] = next > 2
		}
		if fd >= g {
			unix.Close(fd)
			break
		}
		s.free[fd] = true
		next = fd + 1
	}
	return s, nil
}

// alloc takes the lowest placeholder at or above min.
func (s *fdSpace) alloc(min int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fd := max(min, 0); fd < s.g; fd++ {
		if s.free[fd] {
			s.free[fd] = false
			return fd, nil
		}
	}
	if min >= s.g {
		return -1, unix.EINVAL
	}
	return -1, unix.EMFILE
}

// place installs a copy of hostfd at the lowest free guest fd at or above
// min (its own copy stays open).
func (s *fdSpace) place(hostfd, min int, cloexec bool) (int, error) {
	fd, err := s.alloc(min)
	if err != nil {
		return -1, err
	}
	if err := s.install(hostfd, fd, cloexec); err != nil {
		s.release(fd)
		return -1, err
	}
	return fd, nil
}

// open reports whether fd is an open guest fd (not a placeholder, not
// kbox's).
func (s *fdSpace) open(fd int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fd >= 0 && fd < s.g && !s.free[fd] && !s.kbox[fd]
}

// placeholder reports whether fd is a free guest number's placeholder.
func (s *fdSpace) placeholder(fd int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fd >= 0 && fd < s.g && s.free[fd]
}

// install puts a copy of hostfd at guest fd, whatever it held.
func (s *fdSpace) install(hostfd, fd int, cloexec bool) error {
	if fd < 0 || fd >= s.g || s.kbox[fd] {
		return unix.EBADF
	}
	flags := 0
	if cloexec {
		flags = unix.O_CLOEXEC
	}
	if hostfd == fd {
		fdflag := 0
		if cloexec {
			fdflag = unix.FD_CLOEXEC
		}
		_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, fdflag)
		return err
	}
	s.mu.Lock()
	if s.free[fd] {
		// Over a placeholder, whose description ph holds too: no last
		// reference closes, so it never waits: a raw syscall, without
		// the scheduler's hand-off, under the lock it needs anyway.
		_, _, e := unix.RawSyscall(unix.SYS_DUP3, uintptr(hostfd), uintptr(fd), uintptr(flags))
		if e == 0 {
			s.free[fd] = false
		}
		s.mu.Unlock()
		if e != 0 {
			return e
		}
		return nil
	}
	if s.lent[fd].back != nil {
		return s.replaceLent(hostfd, fd, uintptr(flags), false)
	}
	s.mu.Unlock()
	// A guest fd replaced (dup2): its close may wait.
	if err := unix.Dup3(hostfd, fd, flags); err != nil {
		return err
	}
	s.mu.Lock()
	s.free[fd] = false
	s.mu.Unlock()
	return nil
}

// move places kbox-range fd nfd (a fd the host kernel just made for the
// guest) at the lowest free guest fd, keeping its close-on-exec flag, and
// closes nfd.
func (s *fdSpace) move(nfd int) (int, error) {
	if nfd < s.g {
		s.mu.Lock()
		s.free[nfd] = false
		s.mu.Unlock()
		return nfd, nil
	}
	fl, err := unix.FcntlInt(uintptr(nfd), unix.F_GETFD, 0)
	if err != nil {
		return -1, err
	}
	fd, err := s.place(nfd, 0, fl&unix.FD_CLOEXEC != 0)
	unix.Close(nfd)
	return fd, err
}

// release makes guest fd a placeholder again (close(2) of it): one atomic
// dup3, so the number is never free for kbox's next open to take.
func (s *fdSpace) release(fd int) error {
	if fd < 0 || fd >= s.g {
		return unix.EBADF
	}
	s.mu.Lock()
	if s.free[fd] || s.kbox[fd] {
		s.mu.Unlock()
		return unix.EBADF
	}
	if s.lent[fd].back != nil {
		return s.replaceLent(s.ph, fd, unix.O_CLOEXEC, true)
	}
	defer s.mu.Unlock()
	if err := unix.Dup3(s.ph, fd, unix.O_CLOEXEC); err != nil {
		return err
	}
	s.free[fd] = true
	return nil
}

// closeAll releases every guest fd, as the kernel closes a process's
// fds when it exits: the guest has ended, and what its fds held (its
// sockets' ends, pipes) must see it (a connection the guest left open
// ends with a FIN, as on Linux). kbox's own messages go to its copies of
// stdout and stderr, above the guest's range (Prepare).
func (s *fdSpace) closeAll() {
	for fd := 0; fd < s.g; fd++ {
		if s.open(fd) {
			s.release(fd)
		}
	}
}

// closeOnExec releases every guest fd marked close-on-exec (an exec).
func (s *fdSpace) closeOnExec() {
	for fd := 0; fd < s.g; fd++ {
		if !s.open(fd) {
			continue
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC != 0 {
			s.release(fd)
		}
	}
}
