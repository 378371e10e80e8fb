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

// The pumps between kbox's end of a pair and the LKL socket, one
// goroutine each way, urgent data included (docs/networking.md,
// "Sockets and readiness").

// startPumps starts carrying data both ways, skipping junk bytes first.
func (s *Sock) startPumps(junk int) {
	s.mu.Lock()
	if s.pumping || s.closed {
		s.mu.Unlock()
		return
	}
	s.pumping = true
	s.toGuest.Add(1)
	s.fromGuest.Add(1)
	s.mu.Unlock()
	go s.pumpFromGuest(junk)
	go s.pumpToGuest()
}

const pumpBuf = 64 << 10

// pumpBufs holds the pumps' buffers: a connection's two would otherwise
// be 128 KiB allocated (and cleared, and collected) per connection.
var pumpBufs = sync.Pool{New: func() any { b := make([]byte, pumpBuf); return &b }}

// pumpFromGuest carries what the guest wrote to the LKL socket. A stream
// ends at the guest's EOF (its shutdown or last close): LKL's write side
// is shut then.
func (s *Sock) pumpFromGuest(junk int) {
	defer s.fromGuest.Done()
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	buf := *bp
	for junk > 0 {
		m, err := s.file.Read(buf[:min(junk, len(buf))])
		if err != nil {
			return
		}
		junk -= m
	}
	// A stream's urgent byte (the guest's send with MSG_OOB) stays in
	// kbox's end inline (SO_OOBINLINE), and a read stops before it. A
	// read that stopped at the mark takes the byte too, and a read that
	// begins at the mark takes it alone: it goes to LKL with what came
	// before it in one send with MSG_OOB, as the guest sent it, so that
	// LKL's receiver finds the mark inside a segment (docs/networking.md,
	// "Urgent data").
	var m int
	var err error
	var urgent bool
	stream := s.typ == unix.SOCK_STREAM
	// outMu is held from a read that took data until LKL has it
	// (SendMore, more.go).
	held := false
	release := func() {
		if held {
			held = false
			s.outMu.Unlock()
		}
	}
	defer release()
	read := func(fd uintptr) bool {
		if !held {
			s.outMu.Lock()
			held = true
		}
		urgent = stream && atMark(int(fd))
		b := buf
		switch {
		case urgent:
			b = buf[:1]
		case stream:
			b = buf[:len(buf)-1] // room for an urgent byte after it
		}
		for {
			m, err = unix.Read(int(fd), b)
			if err != unix.EINTR {
				break
			}
		}
		if !urgent && m > 0 && stream && atMark(int(fd)) {
			if k, e := unix.Read(int(fd), buf[m:m+1]); e == nil && k == 1 {
				m++
				urgent = true
			}
		}
		if err == unix.EAGAIN {
			release()
			return false
		}
		return true
	}
	rc, rerr := s.file.SyscallConn()
	if rerr != nil {
		return
	}
	for {
		if rerr := rc.Read(read); rerr != nil {
			err = rerr
		}
		if err != nil || m == 0 && (s.typ == unix.SOCK_STREAM || peerShut(s.kfd)) {
			if err == unix.ECONNRESET && stream {
				// The guest's end was closed with data unread
				// in it (AF_UNIX gives kbox's end ECONNRESET
				// then): Linux's close resets the connection.
				s.mu.Lock()
				s.unreadClose = true
				s.mu.Unlock()
			}
			if s.typ == unix.SOCK_STREAM && !sysabi.GuestGone(s.kfd) {
				// The guest's shutdown(SHUT_WR). After its last
				// close, LKL's close ends the connection as
				// Linux's does (a FIN, or a reset with SO_LINGER
				// 0 or unread data).
				lkl.Syscall6(lkl.SysShutdown, uintptr(s.lfd), unix.SHUT_WR, 0, 0, 0, 0)
			}
			return
		}
		s.fromGuestBytes.Add(int64(m))
		flags := uintptr(unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT)
		if urgent {
			flags |= unix.MSG_OOB
		}
		// (An empty datagram is sent too.)
		for off := 0; off < m || off == 0 && s.typ != unix.SOCK_STREAM; {
			n, le := netCall(lkl.SysSendto, uintptr(s.lfd), lkl.Ptr(buf[off:m]), uintptr(m-off), flags, 0, 0)
			runtime.KeepAlive(buf)
			if le == unix.EINTR {
				continue
			}
			s.settled() // what arrived during the call
			if le == unix.EAGAIN {
				s.outWaiting.Store(true)
				lklready.Await(s.wrdy, 0) // LKL's send buffer is full
				s.outWaiting.Store(false)
				s.mu.Lock()
				stop := s.unreadClose // closed with data unread: what is unsent goes (end)
				s.mu.Unlock()
				if stop {
					return
				}
				continue
			}
			if le != 0 {
				if s.typ == unix.SOCK_STREAM {
					// LKL's connection failed: the guest's end
					// reads what LKL received, then EOF or
					// ECONNRESET (pumpToGuest); its writes fail.
					s.sendFailed(le)
					return
				}
				break // a datagram LKL refused (no destination): dropped
			}
			if s.typ != unix.SOCK_STREAM {
				break
			}
			off += int(n)
		}
		release()
	}
}

// passUrgent sends LKL's urgent byte to the guest's end when LKL's
// reading is at its mark, once the sweeps saw urgent data come
// (EPOLLPRI: s.urgentGen past seen) or the last receive stopped short
// (TCP's receive stops at the mark; a sweep may not have run yet, and
// the next receive would read the byte in line); it reports whether it
// did. kbox's LKL stream sockets read urgent data in line (SO_OOBINLINE,
// set at socket()), so a receive never skips the byte: at the mark it is
// read alone and sent as the guest end's own urgent byte, and the
// guest's reads stop before it; recv(MSG_OOB), SIOCATMARK, POLLPRI,
// SIGURG and the guest's own SO_OOBINLINE (set on the guest's end) then
// run natively (docs/networking.md, "Urgent data").
func (s *Sock) passUrgent(seen *uint64, short bool) bool {
	g := s.urgentGen.Load()
	if g == *seen && !short {
		return false
	}
	if v, le := lklQueue(s.lfd, unix.SIOCATMARK); le != 0 || v == 0 {
		return false // the bytes before the mark first: LKL's read stops there
	}
	var b [1]byte
	n, le := netCall(lkl.SysRecvfrom, uintptr(s.lfd), lkl.Ptr(b[:]), 1, unix.MSG_DONTWAIT, 0, 0)
	runtime.KeepAlive(&b)
	if le != 0 || n != 1 {
		return false
	}
	*seen = g
	rc, err := s.file.SyscallConn()
	if err != nil {
		return false
	}
	rc.Write(func(fd uintptr) bool {
		_, err = unix.SendmsgN(int(fd), b[:], nil, nil, unix.MSG_OOB|unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		return err != unix.EAGAIN
	})
	return true
}

// atMark says whether the next byte to read from stream socket fd is
// its urgent byte (SIOCATMARK).
func atMark(fd int) bool {
	v, err := unix.IoctlGetInt(fd, unix.SIOCATMARK)
	return err == nil && v != 0
}

// pumpToGuest carries what LKL received to the guest's end; a datagram's
// source is queued for recvfrom.
func (s *Sock) pumpToGuest() {
	defer s.toGuest.Done()
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	buf := *bp
	addr := make([]byte, sysabi.SockaddrStorage)
	ctl := make([]byte, pumpCtrl)
	var alen, clen int
	errs := 0          // errors in a row, with no datagram and no wait between
	var urgSeen uint64 // the sweeps' count of urgent data passed on (passUrgent)
	short := false     // the last receive gave less than asked: it may have stopped at a mark
	for {
		var n uintptr
		var le unix.Errno
		urg := s.urgentGen.Load()
		if s.typ == unix.SOCK_STREAM {
			passed := s.passUrgent(&urgSeen, short)
			short = false
			if passed {
				continue
			}
			n, le = netCall(lkl.SysRecvfrom, uintptr(s.lfd), lkl.Ptr(buf), uintptr(len(buf)), unix.MSG_DONTWAIT, 0, 0)
		} else {
			// With the control messages the guest asked LKL for
			// (cmsg.go).
			var m int
			m, alen, clen, _, le = lklRecvmsg(s.lfd, buf, addr, ctl, unix.MSG_DONTWAIT)
			n = uintptr(m)
		}
		if le == unix.EINTR {
			continue
		}
		if le == unix.EAGAIN {
			errs = 0
			// Nothing left to read: the urgent data seen before the
			// receive was passed on (an urgent byte is read in line).
			urgSeen = urg
			// Before waiting: what arrived during the calls (the
			// next call sees its own socket's data; this finds the
			// rest), and an opened window's update on LKL's loopback.
			s.settled()
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed && s.typ != unix.SOCK_STREAM {
				// Ended (end shut LKL's receive side, which a
				// datagram socket answers EAGAIN, not 0).
				return
			}
			lklready.Await(s.rdy, 0)
			continue
		}
		if le != 0 && s.typ != unix.SOCK_STREAM && sockError(le) && errs < maxDgramErrors {
			// The socket's error, which the receive cleared in LKL
			// (docs/networking.md, "Datagram errors").
			errs++
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || !s.deliverError(le) {
				return
			}
			continue
		}
		errs = 0
		if le != 0 || n == 0 && s.typ == unix.SOCK_STREAM {
			s.mu.Lock()
			reset := le == unix.ECONNRESET || s.wasReset
			s.toGuestEOF = !reset
			s.mu.Unlock()
			if reset && s.typ == unix.SOCK_STREAM && s.resetGuest() {
				return // the guest reads ECONNRESET
			}
			unix.Shutdown(s.kfd, unix.SHUT_WR) // the guest reads EOF
			return
		}
		if s.typ != unix.SOCK_STREAM {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			var c []byte
			if clen > 0 {
				c = append([]byte(nil), ctl[:clen]...)
			}
			if closed || !s.deliver(buf[:n], addr[:alen], c) {
				return
			}
			continue
		}
		if _, err := s.file.Write(buf[:n]); err != nil {
			return
		}
		short = int(n) < len(buf)
	}
}

// sendFailed is the pump from the guest finding LKL's connection failed:
// reset (ECONNRESET, or EPIPE when its error was taken already), or
// another error (a timeout). The guest's writes must fail now, as on
// Linux, not fill the pair and then wait for ever:
//   - after a reset, if the pump to the guest ended already with EOF (the
//     peer's FIN came first, and the guest wrote on: the peer's reset
//     answered that), the guest's end is reset from here, once this pump
//     has returned;
//   - otherwise kbox's end is shut for reading, so the guest's writes,
//     a blocked one too, fail with EPIPE (Linux: the error first, then
//     EPIPE), while what LKL received still reaches the guest; the pump
//     to the guest passes a reset on when it reaches it (wasReset).
func (s *Sock) sendFailed(le unix.Errno) {
	reset := le == unix.ECONNRESET || le == unix.EPIPE
	s.mu.Lock()
	s.wasReset = s.wasReset || reset
	late := s.toGuestEOF
	s.mu.Unlock()
	if reset && late {
		go s.resetGuest()
		return
	}
	unix.Shutdown(s.kfd, unix.SHUT_RD)
}

// maxDgramErrors bounds the errors a datagram socket's pump passes on in
// a row, with no datagram and no EAGAIN between: each receive clears the
// error it reports (the next one says EAGAIN unless another ICMP error
// came), so a receive that fails for ever is no socket error but a
// broken socket.
const maxDgramErrors = 64

// sockError reports whether LKL's receive on a datagram socket returned
// the socket's pending error (it stays usable), not a fault of the call.
func sockError(le unix.Errno) bool {
	switch le {
	case unix.EBADF, unix.ENOTSOCK, unix.EFAULT, unix.EINVAL, unix.ENOMEM:
		return false
	}
	return true
}

// peerShut reports whether the guest's end of kbox's end kfd is shut for
// writing or closed: a datagram pair's read of 0 is then its end, not
// an empty datagram.
func peerShut(kfd int) bool { return sysabi.EndEvents(kfd)&(unix.POLLRDHUP|unix.POLLHUP) != 0 }

// resetGuest ends a stream socket that LKL's peer reset: the guest's end
// reads what it holds, then ECONNRESET once, then EOF, as a reset TCP
// socket on Linux. How: a unix stream socket closed with unread data in
// its receive queue gives its peer ECONNRESET; kbox takes a copy of the
// guest's end (found by its inode in the guest's fd tables), writes one
// byte into its own end's queue, and closes its end. The socket is ended
// here (the reaper no longer watches it). It reports false when the
// guest's end was not found (closed meanwhile): the caller ends as for
// EOF.
func (s *Sock) resetGuest() bool {
	e := s.n.eng.Load()
	if e == nil {
		return false
	}
	gfd := s.guestCopy()
	if gfd < 0 {
		return false
	}
	defer unix.Close(gfd)
	// Watched before it leaves the table: its getpeername says ENOTCONN
	// from then on (reset.go).
	s.n.watchReset(gfd, s.ino)
	s.n.mu.Lock()
	mine := s.n.byIno[s.ino] == s
	if mine {
		delete(s.n.byIno, s.ino)
	}
	s.n.mu.Unlock()
	if !mine {
		return false // the reaper ends it
	}
	unix.EpollCtl(s.n.reaper, unix.EPOLL_CTL_DEL, s.kfd, nil)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.file.SetReadDeadline(time.Now()) // pumpFromGuest stops reading
	lklready.Signal(s.wrdy)            // or waiting for room in LKL
	s.fromGuest.Wait()
	unix.SendmsgN(gfd, []byte{0}, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	s.n.dropReady(s)
	lkl.Close(s.lfd)
	s.file.Close()
	return true
}

// drain reads the junk back once LKL's connect ended: the guest's end
// turns writable, and SO_ERROR tells how it ended.
func drain(s *Sock, junk int) {
	buf := make([]byte, 4096)
	for junk > 0 {
		m, err := s.file.Read(buf[:min(junk, len(buf))])
		if err != nil {
			return
		}
		junk -= m
	}
}
