package inet

import (
	"encoding/binary"
	"runtime"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/lklready"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// connect(2) on an internet socket: LKL's handshake, waited for off the
// serving loop, interruptible by signals as on Linux.

// Connect serves connect(2) on an internet socket. A datagram
// socket's connect is immediate. A stream socket's waits in LKL, on a
// goroutine: the guest waits (blocking) or gets EINPROGRESS and sees its
// end writable when LKL's connect has finished.
func (s *Sock) Connect(r *Req) Result {
	a, en := ReadAddr(r.G, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, LKL)
	}
	r.Peer = sockaddrString(a)
	if s.typ != unix.SOCK_STREAM {
		_, le := lkl.Syscall6(lkl.SysConnect, uintptr(s.lfd), ptrOr0(a), uintptr(len(a)), 0, 0, 0)
		runtime.KeepAlive(a)
		return errno(le, LKL)
	}
	gfd, en := s.renew(r)
	if en != 0 {
		return errno(en, Host)
	}
	s.settleConnect()
	s.mu.Lock()
	switch {
	case s.connecting && !sysabi.Nonblocking(gfd):
		// Linux: a blocking connect on a connecting socket (an earlier
		// one interrupted) waits for it and gives its result.
		done := s.connDone
		s.mu.Unlock()
		unix.Close(gfd)
		return s.awaitConnect(r, done)
	case s.connecting:
		s.mu.Unlock()
		unix.Close(gfd)
		return errno(unix.EALREADY, LKL)
	case s.connected:
		// Linux: the first connect after a connect that finished
		// without the caller (non-blocking, or interrupted) gives 0,
		// then EISCONN.
		unseen := s.unseen
		s.unseen = false
		s.mu.Unlock()
		unix.Close(gfd)
		if unseen {
			return ok(0, LKL)
		}
		return errno(unix.EISCONN, LKL)
	}
	s.connecting = true
	s.n.connecting.Add(1)
	s.connDone = make(chan struct{})
	s.mu.Unlock()
	// The guest's end is held unwritable while LKL connects, blocking or
	// not: an interrupted blocking connect goes on in LKL, as on Linux,
	// and the guest then waits for POLLOUT and reads SO_ERROR.
	//
	// kbox keeps no copy of the guest's end while LKL connects: the
	// guest's last close must reach the reaper, whose shutdown aborts
	// LKL's connect as Linux's close does. (A copy held to the end of
	// the connect kept a closed socket connecting in LKL, and when it
	// got through it took a place in the listener's queue that no one
	// would accept.) The end is found again to give back its send
	// buffer (guestCopy).
	junk := holdUnwritable(gfd, s)
	nb := sysabi.Nonblocking(gfd)
	var timeout time.Duration // SO_SNDTIMEO (also set on the guest's end): a blocking connect's limit
	if tv, err := unix.GetsockoptTimeval(gfd, unix.SOL_SOCKET, unix.SO_SNDTIMEO); err == nil && !nb {
		timeout = time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
	}
	s.hint(r.G.Holder(), int(int32(r.Args[0])))
	unix.Close(gfd)
	// LKL's socket is non-blocking here (newInet): its connect sends the
	// SYN now, on this thread, and only the wait for the handshake goes
	// to a goroutine (a goroutine started from the serving thread ran
	// about 0.1 ms later on this loaded 2-core machine, and the SYN
	// waited for it). An error LKL gives at once (no route, a bad
	// address) is the guest's answer, blocking or not, as on Linux.
	s.n.settleListeners() // a listener the guest closed refuses it
	_, le := lkl.Syscall6(lkl.SysConnect, uintptr(s.lfd), ptrOr0(a), uintptr(len(a)), 0, 0, 0)
	runtime.KeepAlive(a) // LKL read it: a uintptr does not keep it
	s.settled()          // a listener of the guest's own has a connection
	if le == unix.ECONNABORTED {
		// LKL's socket still says connecting after a connect that
		// failed; its error was taken by kbox (awaitHandshake). Linux
		// gives that error to this connect when the guest has not read
		// it (SO_ERROR), else ECONNABORTED; the socket then connects
		// anew (asyncio's test_sock_client_connect_racing). When the
		// failed connect's own answer was its error, Linux's socket was
		// unconnected at once: this connect is a new one (LKL's answer
		// has now made LKL's socket unconnected too).
		s.mu.Lock()
		given := s.refusalGiven
		s.refusalGiven = false
		if s.soError != 0 {
			le = s.soError
		}
		s.mu.Unlock()
		if given && le == unix.ECONNABORTED {
			_, le = lkl.Syscall6(lkl.SysConnect, uintptr(s.lfd), ptrOr0(a), uintptr(len(a)), 0, 0, 0)
			runtime.KeepAlive(a)
			s.settled()
		}
	}
	if le != unix.EINPROGRESS {
		s.connectDone(le)
		drain(s, junk)
		if le == 0 {
			s.startPumps(0)
		}
		s.mu.Lock()
		close(s.connDone)
		s.connDone = nil
		if le != 0 {
			s.soError = 0 // the answer carries it
		}
		s.mu.Unlock()
		return errno(le, LKL)
	}
	s.inConnect.Add(1)
	connect := func(tick func()) unix.Errno {
		defer s.inConnect.Done()
		le := s.awaitHandshake(tick)
		if le == 0 {
			// Until a connect or this one's answer reports it; set
			// before connectDone gives the guest's end its send
			// buffer back (writable: the guest may connect again).
			s.mu.Lock()
			s.unseen = true
			s.mu.Unlock()
		}
		s.connectDone(le)
		// The junk goes before the guest's end counts as connected:
		// a connect answered 0 finds its end writable.
		drain(s, junk)
		if le == 0 {
			s.startPumps(0)
		}
		s.mu.Lock()
		if s.connDone != nil {
			close(s.connDone)
			s.connDone = nil
		}
		s.mu.Unlock()
		return le
	}
	if nb {
		go connect(nil)
		return errno(unix.EINPROGRESS, LKL)
	}
	p := r.G.Defer(timeout > 0, false)
	go func() {
		// The wait looks for a signal itself (watchInterrupt's check,
		// without a goroutine and a ticker of its own per connect).
		// SO_SNDTIMEO ends the wait with EINPROGRESS, as on Linux,
		// to the next sysabi.InterruptTick; LKL's connect goes on.
		watching, start := true, time.Now()
		le := connect(func() {
			if !watching {
				return
			}
			if p.Valid() != nil {
				watching = false
				return
			}
			if timeout > 0 && time.Since(start) >= timeout {
				watching = false
				s.n.late(func() { p.ReplyErrno(unix.EINPROGRESS) })
				return
			}
			if p.Signalled() {
				watching = false
				s.n.late(func() { p.ReplyErrno(s.n.intrErrno(timeout > 0)) })
			}
		})
		s.n.late(func() {
			// The answer carries the error; SO_ERROR keeps it only
			// if the guest no longer waits (a signal interrupted its
			// connect: EINTR, and LKL's connect went on). The lock
			// keeps the guest's next getsockopt after the answer.
			s.mu.Lock()
			defer s.mu.Unlock()
			var err error
			if le != 0 {
				err = p.ReplyErrno(le)
			} else {
				err = p.Reply(0)
			}
			if err == nil && s.soError == le {
				s.soError = 0
			}
			if err == nil && le != 0 {
				s.refusalGiven = true
			}
			if err == nil && le == 0 {
				s.unseen = false
			}
		})
	}()
	return deferred(LKL)
}

// settleConnect waits, at most peerSettle, for the goroutine of s's
// last connect when LKL's connect has ended already: a guest that
// connects again at once gets the result (a refusal, or connected), not
// EALREADY, as on Linux, where the loopback's answer has come before
// the first connect returned; and a goroutine that has recorded the
// result but not yet drained its filler from kbox's end does not drain
// the next connect's (the guest's end would look writable while that
// one goes on).
func (s *Sock) settleConnect() {
	s.mu.Lock()
	done := s.connDone
	connecting := s.connecting
	s.mu.Unlock()
	if done == nil {
		return
	}
	if connecting {
		if rev, ok := lklPoll(s.lfd, unix.POLLOUT, 0); !ok || rev&(unix.POLLOUT|unix.POLLERR|unix.POLLHUP) == 0 {
			return // still connecting
		}
		s.n.ready.Sweep() // the connect's waiter learns it now
	}
	lklready.Await(done, peerSettle)
}

// handshakeTick bounds how late a connect's wait notices that its
// socket ended (the reaper's shutdown also wakes it).
const handshakeTick = 1000

// awaitHandshake waits for LKL's connect in progress on s to end and
// returns its result: 0, or the error SO_ERROR gives (ECONNABORTED if
// the socket was shut meanwhile without one). A non-nil tick is called
// every sysabi.InterruptTick of the wait.
func (s *Sock) awaitHandshake(tick func()) unix.Errno {
	every := time.Duration(handshakeTick) * time.Millisecond
	if tick != nil {
		every = sysabi.InterruptTick
	}
	next := time.Now().Add(every)
	for {
		// LKL's poll without waiting; the wait is for wrdy (ready.go).
		rev, ok := lklPoll(s.lfd, unix.POLLOUT, 0)
		if !ok {
			if d := time.Until(next); d > 0 && lklready.Await(s.wrdy, d) {
				continue
			}
			next = time.Now().Add(every)
			if tick != nil {
				tick()
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if !closed {
				continue
			}
		}
		if rev&(unix.POLLOUT|unix.POLLERR|unix.POLLHUP) == unix.POLLOUT {
			return 0 // connected (a pending error would be POLLERR): no SO_ERROR call
		}
		v := make([]byte, 4)
		vlen := make([]byte, 4)
		binary.NativeEndian.PutUint32(vlen, 4)
		_, le := lkl.Syscall6(lkl.SysGetsockopt, uintptr(s.lfd), unix.SOL_SOCKET, unix.SO_ERROR, lkl.Ptr(v), lkl.Ptr(vlen), 0)
		runtime.KeepAlive(v)
		runtime.KeepAlive(vlen)
		if le != 0 {
			return le
		}
		if se := unix.Errno(binary.NativeEndian.Uint32(v)); se != 0 {
			return se
		}
		if !ok || rev&(unix.POLLHUP|unix.POLLERR) != 0 {
			return unix.ECONNABORTED
		}
		return 0
	}
}

// awaitConnect answers a blocking connect made while an earlier connect of
// s goes on: once it ended, 0 or its error (taken from SO_ERROR).
func (s *Sock) awaitConnect(r *Req, done chan struct{}) Result {
	p := r.G.Defer(false, false)
	stop := make(chan struct{})
	go s.n.engine().WatchInterrupt(p, stop)
	go func() {
		<-done
		close(stop)
		s.n.late(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.connected {
				if p.Reply(0) == nil {
					s.unseen = false
				}
				return
			}
			le := s.soError
			if le == 0 {
				le = unix.ECONNABORTED
			}
			if p.ReplyErrno(le) == nil {
				s.soError = 0
			}
		})
	}()
	return deferred(LKL)
}

// holdUnwritable fills the guest end's send buffer (shrunk first) so that
// poll does not report it writable while LKL connects; it returns the
// bytes written, which the pump skips.
func holdUnwritable(gfd int, s *Sock) int {
	s.sndbuf, _ = unix.GetsockoptInt(gfd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	unix.SetsockoptInt(gfd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1)
	junk := make([]byte, 4096)
	n := 0
	for {
		m, err := unix.SendmsgN(gfd, junk, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	s.junk = n
	return n
}

// connectDone records a non-blocking connect's result and gives the
// guest's end its send buffer back.
func (s *Sock) connectDone(le unix.Errno) {
	s.mu.Lock()
	if s.connecting {
		s.n.connecting.Add(-1)
	}
	s.connecting = false
	s.connected = le == 0
	s.soError = le
	sb := s.sndbuf
	s.mu.Unlock()
	if sb > 0 {
		if gfd := s.guestCopy(); gfd >= 0 {
			unix.SetsockoptInt(gfd, unix.SOL_SOCKET, unix.SO_SNDBUF, sb/2) // the kernel doubles it
			unix.Close(gfd)
		}
	}
}
