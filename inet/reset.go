package inet

import (
	"runtime"
	"sync"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/lklready"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// A reset the guest's close sends, as a local peer sees it
// (docs/networking.md, "Signals, resets, errors").
//
// On Linux a close that resets its connection (SO_LINGER 0, data unread)
// has sent the reset when it returns: a peer on the same machine then
// gets ENOTCONN from getpeername at once, and still reads what came
// before the reset. kbox ends a closed socket on the reaper's goroutine,
// a little later, and LKL's loopback delivers the reset later still.
// CPython's ssl wraps a socket by asking getpeername and then reading one
// byte without waiting: it took such a connection for a live one
// (test_ssl's test_preauth_data_to_tls_client and _server).

// watchReset keeps the inode of a reset socket's guest end (gfd, kbox's
// copy) until the guest closes it: the socket is ended, the end no
// longer in the table, and getpeername on it says ENOTCONN, as a reset
// TCP socket's does (the end's own, a unix socket's, would give an empty
// unix address). Nothing is kept when the kernel reports no close.
func (n *Net) watchReset(gfd int, ino uint64) {
	ifd := n.closesFd()
	if ifd < 0 {
		return
	}
	wd, err := unix.InotifyAddWatch(ifd, fdPath(gfd), unix.IN_CLOSE)
	if err != nil {
		return
	}
	si := &standIn{ino: ino, wd: int32(wd)}
	n.mu.Lock()
	n.stands.byIno[ino] = si
	n.stands.byWd[si.wd] = si
	n.mu.Unlock()
}

// recentResets are the local addresses of the stream sockets whose LKL
// close resets their connection, from the start of their end until
// closedSettle after LKL's close: a peer's getpeername looks for its own
// peer among them.
type recentResets struct {
	mu sync.Mutex
	at map[string]time.Time // when LKL's close was made; zero: not yet
}

// noteReset records that LKL stream socket fd's close will reset its
// connection (before the close: its name is still there), and returns
// the name for resetSent.
func (n *Net) noteReset(fd int) string {
	name, ok := lklSockName(fd, lkl.SysGetsockname)
	if !ok {
		return ""
	}
	r := &n.resets
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, t := range r.at {
		if !t.IsZero() && time.Since(t) > closedSettle {
			delete(r.at, k)
		}
	}
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	r.at[name] = time.Time{}
	return name
}

// resetSent records that LKL's close of the socket noted as name was
// made.
func (n *Net) resetSent(name string) {
	if name == "" {
		return
	}
	r := &n.resets
	r.mu.Lock()
	r.at[name] = time.Now()
	r.mu.Unlock()
}

// resetLately says whether a socket named name ("": any) resets its
// connection now or did within closedSettle.
func (n *Net) resetLately(name string) bool {
	r := &n.resets
	r.mu.Lock()
	defer r.mu.Unlock()
	recent := func(t time.Time) bool { return t.IsZero() || time.Since(t) <= closedSettle }
	if name == "" {
		for _, t := range r.at {
			if recent(t) {
				return true
			}
		}
		return false
	}
	t, ok := r.at[name]
	return ok && recent(t)
}

// lklSockName is LKL socket fd's name (nr: getsockname or getpeername).
func lklSockName(fd int, nr uintptr) (string, bool) {
	var sa [sysabi.SockaddrStorage]byte
	l := uint32(len(sa))
	_, le := netCall(nr, uintptr(fd), lkl.Ptr(sa[:]), lkl.PtrOf(&l), 0, 0, 0)
	runtime.KeepAlive(&sa)
	if le != 0 {
		return "", false
	}
	return string(sa[:min(int(l), len(sa))]), true
}

// settlePeerReset lets a reset by the guest's close of connected stream
// socket s's peer reach s before getpeername answers: the sockets the
// guest closed are ended now (reapPending); while the end of some has not
// yet looked whether its close resets (Net.noting), or once s's peer is
// known to reset (noteReset), kbox waits, at most closedSettle, for s's
// LKL socket to show the reset (POLLHUP, POLLERR), then for its pump to
// have carried to the guest's end everything LKL received (the pump ends
// at the reset). Nothing is waited for when no socket's end is that new
// and no reset was noted lately.
// It reports whether s is ended now (a reset ends it: resetGuest), its
// LKL socket closed.
func (s *Sock) settlePeerReset() (ended bool) {
	s.mu.Lock()
	connected := s.connected && s.typ == unix.SOCK_STREAM && !s.listening
	s.mu.Unlock()
	if !connected {
		return false
	}
	defer func() {
		s.mu.Lock()
		ended = s.closed
		s.mu.Unlock()
	}()
	n := s.n
	n.reapPending()
	if n.noting.Load() == 0 && !n.resetLately("") {
		return false // no close being looked at, no reset lately: nothing to wait for
	}
	peer, ok := lklSockName(s.lfd, lkl.SysGetpeername)
	if !ok {
		return false // not connected in LKL (any more)
	}
	start := time.Now()
	for {
		if rev, ok := lklPoll(s.lfd, unix.POLLIN, 0); ok && rev&(unix.POLLHUP|unix.POLLERR) != 0 {
			break
		}
		if time.Since(start) >= closedSettle || n.noting.Load() == 0 && !n.resetLately(peer) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	done := make(chan struct{})
	go func() {
		s.toGuest.Wait()
		close(done)
	}()
	n.ready.Sweep() // the pump to the guest learns it now
	lklready.Await(done, peerSettle)
	return false
}
