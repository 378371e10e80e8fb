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

// listen(2), accept(2) and accept4(2) on an internet socket.

// Listen serves listen(2) on an internet socket: LKL's listen, the
// LKL socket made non-blocking (accept waits in kbox, never in LKL on the
// serving loop), and a watcher that puts one token byte in the guest's
// end while a connection waits: the guest's end is readable then, as a
// listening socket with a pending connection is.
func (s *Sock) Listen(r *Req) Result {
	if s.typ != unix.SOCK_STREAM {
		return errno(unix.EOPNOTSUPP, LKL)
	}
	if _, le := lkl.Syscall6(lkl.SysListen, uintptr(s.lfd), uintptr(int32(r.Args[1])), 0, 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	gfd, en := s.renew(r)
	if en != 0 {
		return errno(en, Host)
	}
	unix.Close(gfd)
	s.mu.Lock()
	start := !s.listening
	s.listening = true
	closed := s.closed
	s.mu.Unlock()
	if start && !closed {
		s.n.lmu.Lock()
		s.n.lsocks[s] = true
		s.n.lmu.Unlock()
	}
	if start {
		s.taken = make(chan struct{}, 1)
		s.lwait = make(chan struct{})
		s.toGuest.Add(1)
		go s.watchListener()
	}
	return ok(0, LKL)
}

// lklPollIn waits up to ms for the LKL socket fd to be readable.
func lklPollIn(fd, ms int) bool {
	rev, ok := lklPoll(fd, unix.POLLIN, ms)
	return ok && rev&unix.POLLIN != 0
}

// lklPoll waits up to ms for events on the LKL fd: the events reported,
// and whether any were (false: the time ran out or the poll failed).
func lklPoll(fd int, events int16, ms int) (int16, bool) {
	pfd := make([]byte, 8) // struct pollfd
	binary.NativeEndian.PutUint32(pfd[0:], uint32(fd))
	binary.NativeEndian.PutUint16(pfd[4:], uint16(events))
	ts := make([]byte, 16) // struct timespec
	binary.NativeEndian.PutUint64(ts[0:], uint64(ms/1000))
	binary.NativeEndian.PutUint64(ts[8:], uint64(ms%1000)*1e6)
	n, le := lkl.Syscall6(lkl.SysPpoll, lkl.Ptr(pfd), 1, lkl.Ptr(ts), 0, 8, 0)
	runtime.KeepAlive(pfd)
	runtime.KeepAlive(ts)
	if le != 0 || n == 0 {
		return 0, false
	}
	return int16(binary.NativeEndian.Uint16(pfd[6:])), true
}

// listenTick bounds how late the watcher notices its socket's end.
const listenTick = 200

// acceptTick bounds how late a blocking accept notices a signal.
const acceptTick = 100

// watchListener keeps the token in the guest's end while LKL has a
// connection to accept, and wakes the blocking accepts (listenWait).
func (s *Sock) watchListener() {
	defer s.toGuest.Done()
	for {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return
		}
		// LKL's queue is asked under s.mu, which an accept takes to
		// remove the token after taking a connection (takeToken): a
		// token is never written for a connection an accept took
		// between the look and the write. Such a stale token kept the
		// guest's end readable with nothing to accept, so the next
		// connection wrote no token, and a guest waiting for an edge
		// (Go's netpoller, epoll with EPOLLET) never accepted it
		// (TestNetGoProgram: requests waited 10 s under load).
		s.mu.Lock()
		waiting := !s.closed && lklPollIn(s.lfd, 0)
		if waiting {
			if !s.token {
				if _, err := unix.Write(s.kfd, []byte{'A'}); err == nil {
					s.token = true
				}
			}
			close(s.lwait)
			s.lwait = make(chan struct{})
		}
		s.mu.Unlock()
		if !waiting {
			lklready.Await(s.rdy, listenTick*time.Millisecond)
			continue
		}
		select { // until an accept took the token, or a tick
		case <-s.taken:
		case <-time.After(listenTick * time.Millisecond):
		}
	}
}

// listenWait returns a channel closed when the watcher next sees a
// connection waiting in LKL.
func (s *Sock) listenWait() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lwait
}

// takeToken removes the token from the guest's end gfd after an accept.
func (s *Sock) takeToken(gfd int) {
	s.mu.Lock()
	if s.token {
		var b [1]byte
		if n, _, _ := unix.Recvfrom(gfd, b[:], unix.MSG_DONTWAIT); n == 1 {
			s.token = false
		}
	}
	s.mu.Unlock()
	select {
	case s.taken <- struct{}{}:
	default:
	}
}

// dropStaleToken removes the token from the guest's end gfd when LKL has
// no connection waiting after all (an accept found none): the watcher
// writes one again for the next connection, the edge a guest waiting in
// epoll with EPOLLET needs.
func (s *Sock) dropStaleToken(gfd int) {
	s.mu.Lock()
	if s.token && !lklPollIn(s.lfd, 0) {
		var b [1]byte
		if n, _, _ := unix.Recvfrom(gfd, b[:], unix.MSG_DONTWAIT); n == 1 {
			s.token = false
		}
	}
	s.mu.Unlock()
}

// Accept serves accept(2) and accept4(2) on an internet socket: LKL's
// accept, and the new socket gets its own pair. A blocking accept waits
// on a goroutine.
func (s *Sock) Accept(r *Req, flags int) Result {
	if flags&^(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) != 0 {
		return errno(unix.EINVAL, LKL)
	}
	s.mu.Lock()
	listening := s.listening
	s.mu.Unlock()
	if !listening {
		if s.typ != unix.SOCK_STREAM {
			return errno(unix.EOPNOTSUPP, LKL) // as Linux's datagram sockets
		}
		return errno(unix.EINVAL, LKL)
	}
	gfd, en := GuestEnd(r.G, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	var glen int32
	if r.Args[1] != 0 {
		var lb [4]byte
		if err := r.G.Read(r.Args[2], lb[:]); err != nil {
			unix.Close(gfd)
			return errno(unix.EFAULT, LKL)
		}
		if glen = int32(binary.NativeEndian.Uint32(lb[:])); glen < 0 {
			unix.Close(gfd)
			return errno(unix.EINVAL, LKL)
		}
	}
	try := func() (*Sock, int, []byte, unix.Errno) {
		addr := make([]byte, sysabi.SockaddrStorage)
		alen := make([]byte, 4)
		binary.NativeEndian.PutUint32(alen, sysabi.SockaddrStorage)
		if s.n.full() {
			return nil, -1, nil, unix.ENFILE // the connection stays queued, as Linux's
		}
		nfd, le := lkl.Syscall6(lkl.SysAccept4, uintptr(s.lfd), lkl.Ptr(addr), lkl.Ptr(alen), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0, 0)
		if le == unix.EAGAIN {
			s.dropStaleToken(gfd)
		}
		if le != 0 {
			return nil, -1, nil, le
		}
		s.takeToken(gfd)
		ns, gend, en := s.n.pair(int(nfd), s.family, unix.SOCK_STREAM, flags&unix.SOCK_NONBLOCK != 0)
		if en != 0 {
			lkl.Close(int(nfd))
			return nil, -1, nil, en
		}
		a := addr[:min(binary.NativeEndian.Uint32(alen), sysabi.SockaddrStorage)]
		ns.mu.Lock()
		ns.connected = true
		ns.mu.Unlock()
		ns.startPumps(0)
		s.n.settleLocalPeer(a)
		return ns, gend, a, 0
	}
	// writeAddr gives the guest the peer's address (what fits) and length
	// (the request's arguments are copied: a deferred call outlives r).
	addrArg, lenArg := r.Args[1], r.Args[2]
	writeAddr := func(write func(uint64, []byte) error, a []byte) unix.Errno {
		if addrArg == 0 {
			return 0
		}
		if write(addrArg, a[:min(len(a), int(glen))]) != nil {
			return unix.EFAULT
		}
		var lb [4]byte
		binary.NativeEndian.PutUint32(lb[:], uint32(len(a)))
		if write(lenArg, lb[:]) != nil {
			return unix.EFAULT
		}
		return 0
	}
	cloexec := flags&unix.SOCK_CLOEXEC != 0
	ns, gend, a, le := try()
	if le == 0 {
		r.Peer = sockaddrString(a)
		unix.Close(gfd)
		defer unix.Close(gend)
		if en := writeAddr(r.G.Write, a); en != 0 {
			return errno(en, LKL)
		}
		nfd, err := r.G.AddFDReply(gend, cloexec)
		if err != nil {
			return fail(err, Host)
		}
		ns.hint(r.G.Holder(), nfd)
		return answered(int64(nfd), LKL)
	}
	if le != unix.EAGAIN || sysabi.Nonblocking(gfd) {
		unix.Close(gfd)
		return errno(le, LKL)
	}
	p := r.G.Defer(false, false)
	go func() {
		defer unix.Close(gfd)
		for {
			if p.Valid() != nil {
				return // the guest went (or a signal took it out of the call)
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				s.n.late(func() { p.ReplyErrno(unix.EBADF) })
				return
			}
			if p.Signalled() {
				// A signal to take (seccomp tier: see watchInterrupt).
				s.n.late(func() { p.ReplyErrno(s.n.intrErrno(false)) })
				return
			}
			if w := s.listenWait(); !lklPollIn(s.lfd, 0) {
				select { // the watcher sees the next connection
				case <-w:
				case <-time.After(acceptTick * time.Millisecond):
				}
				continue
			}
			if !p.Claim() {
				continue // (a signal meanwhile: the connection stays for the next accept)
			}
			ns, gend, a, le := try()
			if le == unix.EAGAIN {
				p.Release()
				continue
			}
			proc := r.G.Holder()

			s.n.late(func() {
				if le != 0 {
					p.ReplyErrno(le)
					return
				}
				defer unix.Close(gend)
				if en := writeAddr(p.Write, a); en != 0 {
					p.ReplyErrno(en)
					return
				}
				nfd, err := p.AddFD(gend, cloexec)
				if err != nil {
					p.ReplyErrno(sysabi.Errno(err))
					return
				}
				ns.hint(proc, nfd)
				p.Reply(int64(nfd))
			})
			return
		}
	}()
	return deferred(LKL)
}
