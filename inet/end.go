package inet

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/lklready"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// How an internet socket ends: the reaper sees the guest's end closed
// everywhere (POLLHUP on kbox's end), lets LKL send what is unsent, and
// closes the LKL socket; connect and bind first settle what ended.

// recentlyEnded says whether kbox closed an LKL socket within the last
// closedSettle: LKL may not have released its port yet (inetBind).
func (n *Net) recentlyEnded() bool {
	return time.Since(time.Unix(0, n.endedAt.Load())) < closedSettle
}

// full reports whether Max internet sockets are open. At the bound it
// first ends the sockets whose guest end is already closed (the reaper
// may not have run yet): a close frees its place at once, as on Linux.
func (n *Net) full() bool {
	if n.Max <= 0 {
		return false
	}
	n.mu.Lock()
	full := len(n.byIno) >= n.Max
	n.mu.Unlock()
	if !full {
		return false
	}
	n.reapPending()
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.byIno) >= n.Max
}

// reapPending ends now the sockets whose guest end is closed but which
// the reaper has not taken yet; it reports whether there were any.
func (n *Net) reapPending() bool {
	var evs [64]unix.EpollEvent
	any := false
	for {
		m, err := unix.EpollWait(n.reaper, evs[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return any
		}
		any = true
		n.reapEvents(evs[:m])
		if m < len(evs) {
			return any
		}
	}
}

// settleClosed ends the sockets the guest has closed (reapPending) and
// waits, at most d, for the ends in progress: on Linux a close frees the
// socket's address at once, and a bind to the port of a socket just
// closed (find a free port with a socket, close it, bind a server to it,
// as test frameworks do) got EADDRINUSE while kbox's end of it still
// held the port. It reports whether there was anything to wait for.
func (n *Net) settleClosed(d time.Duration) bool {
	// The reaper may have the close's event already, its socket not yet
	// counted as ending: anyGone sees it.
	return n.settle(d, func() bool { return n.ending.Load() > 0 || n.anyGone() })
}

// settle ends the sockets whose guest end is closed (reapPending) and
// waits, at most d, while busy says their ends are still in progress. It
// reports whether there was anything to end or wait for.
func (n *Net) settle(d time.Duration, busy func() bool) bool {
	settled := n.reapPending()
	deadline := time.Now().Add(d)
	for busy() && time.Now().Before(deadline) {
		settled = true
		time.Sleep(100 * time.Microsecond)
		n.reapPending()
	}
	return settled
}

// settleListeners ends, before a connect, the guest's listeners whose
// last fd it has closed, and waits for that, at most closedSettle: on
// Linux the close frees the port at once and a connect to it is refused.
// The reaper ends them a little later, and a connect in between was
// accepted by the listener the guest had closed (Python's
// test_asyncio test_server_close; `inet closedlistener`: 1 to 26 of 50
// refused, Linux 50). Cheap when nothing was closed: one epoll_wait that
// does not wait, and a poll of each listener's end.
func (n *Net) settleListeners() { n.settle(closedSettle, n.listenerGone) }

// listenerGone says whether a listener's guest end is closed everywhere
// while its LKL socket is still open.
func (n *Net) listenerGone() bool {
	n.lmu.Lock()
	defer n.lmu.Unlock()
	for s := range n.lsocks {
		if sysabi.GuestGone(s.kfd) {
			return true
		}
	}
	return false
}

// settleLocalPeer finishes, before an accept is answered, the connect of
// the guest's own socket that the accepted connection came from (peer,
// the accepted socket's peer address), when there is one (the guest's
// loopback): LKL's handshake is done, and its connect ends on a
// goroutine of kbox's a little later, which makes the guest's end
// writable. A guest that connects without waiting, accepts, and polls
// both ends (Python's test_epoll) saw the server end writable and not
// yet the client's, where Linux has both. Bounded by peerSettle.
func (n *Net) settleLocalPeer(peer []byte) {
	if n.connecting.Load() == 0 {
		return
	}
	n.mu.Lock()
	var cs []*Sock
	for _, c := range n.byIno {
		if c.typ == unix.SOCK_STREAM {
			cs = append(cs, c)
		}
	}
	n.mu.Unlock()
	name := make([]byte, sysabi.SockaddrStorage+4)
	for _, c := range cs {
		c.mu.Lock()
		connecting := c.connecting
		c.mu.Unlock()
		if !connecting {
			continue
		}
		binary.NativeEndian.PutUint32(name[sysabi.SockaddrStorage:], sysabi.SockaddrStorage)
		if _, le := netCall(lkl.SysGetsockname, uintptr(c.lfd), lkl.Ptr(name[:sysabi.SockaddrStorage]), lkl.Ptr(name[sysabi.SockaddrStorage:]), 0, 0, 0); le != 0 {
			continue
		}
		l := min(binary.NativeEndian.Uint32(name[sysabi.SockaddrStorage:]), sysabi.SockaddrStorage)
		if !bytes.Equal(name[:l], peer) {
			continue
		}
		c.mu.Lock()
		done := c.connDone
		c.mu.Unlock()
		if done != nil {
			n.ready.Sweep() // LKL's connect is done: its waiter learns it now
			lklready.Await(done, peerSettle)
		}
		return
	}
	runtime.KeepAlive(name)
}

// peerSettle bounds an accept's wait for its local peer's connect
// (settleLocalPeer): the handshake is done in LKL, only kbox's goroutine
// is to run.
const peerSettle = 20 * time.Millisecond

// closedSettle bounds how long a bind waits for sockets being ended
// (settleClosed): ending one that held only an address takes well under
// a millisecond; one with unsent data can take long, and the serving
// loop waits meanwhile.
const closedSettle = 100 * time.Millisecond

// watch adds s to the reaper, started with the first socket.
func (n *Net) watch(s *Sock) {
	n.once.Do(func() { go n.reap() })
	// No events asked: POLLHUP and POLLERR are always reported. The data
	// is the inode.
	ev := unix.EpollEvent{Fd: int32(uint32(s.ino)), Pad: int32(uint32(s.ino >> 32))}
	unix.EpollCtl(n.reaper, unix.EPOLL_CTL_ADD, s.kfd, &ev)
}

// reap ends the sockets whose guest end is closed everywhere.
func (n *Net) reap() {
	evs := make([]unix.EpollEvent, 64)
	for {
		m, err := unix.EpollWait(n.reaper, evs, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		n.reapEvents(evs[:m])
	}
}

// reapEvents ends the sockets of the reaper's events (whoever of the
// reaper and full sees an event first ends its socket).
func (n *Net) reapEvents(evs []unix.EpollEvent) {
	for _, ev := range evs {
		ino := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
		if ino == closesKey {
			n.reapStandIns()
			continue
		}
		n.mu.Lock()
		s := n.byIno[ino]
		if s != nil {
			// Counted as ending before it leaves the table: whoever
			// looks (anyGone, settlePeerReset) sees one or the other.
			n.ending.Add(1)
			n.noting.Add(1)
			delete(n.byIno, ino)
		}
		n.mu.Unlock()
		if s != nil {
			unix.EpollCtl(n.reaper, unix.EPOLL_CTL_DEL, s.kfd, nil)
			go func() {
				s.end()
				n.ending.Add(-1)
			}()
		}
	}
}

// end closes s once its guest end is gone: what the guest wrote last is
// still carried to LKL, then LKL's receive side is shut (waking the pump
// that waits in recv), a connected stream's write side too (its FIN:
// waitUnsent), then both are closed.
func (s *Sock) end() {
	s.mu.Lock()
	s.closed = true
	conn := s.connected
	s.mu.Unlock()
	unread := s.typ == unix.SOCK_STREAM && s.closedUnread()
	if unread {
		// Linux's close resets at once and drops what is unsent; the
		// pump from the guest may wait for room in LKL for ever (the
		// peer reads nothing).
		s.mu.Lock()
		s.unreadClose = true
		s.mu.Unlock()
		s.file.SetReadDeadline(time.Now())
		lklready.Signal(s.wrdy)
	}
	var linger lklLinger
	reset := "" // the name noted as resetting (noteReset)
	if s.typ == unix.SOCK_STREAM && conn {
		// The guest's SO_LINGER, read once: a close that resets is
		// known to a local peer's getpeername from now on
		// (settlePeerReset), before the reset is sent.
		linger = lingerOf(s.lfd)
		if unread || linger.on && linger.secs == 0 {
			reset = s.n.noteReset(s.lfd)
		}
	}
	s.n.noting.Add(-1)
	s.fromGuest.Wait()
	// Also aborts a connect in progress (LKL's shutdown of a connecting
	// socket disconnects it), as the guest's close does on Linux. The
	// pump to the guest, a listener's watcher and a connect's wait are
	// woken to see it.
	lkl.Syscall6(lkl.SysShutdown, uintptr(s.lfd), unix.SHUT_RD, 0, 0, 0, 0)
	lklready.Signal(s.rdy)
	lklready.Signal(s.wrdy)
	s.toGuest.Wait()
	s.inConnect.Wait()
	s.n.dropReady(s)
	if s.typ == unix.SOCK_STREAM {
		// LKL's close acts only when it releases the socket, which it
		// defers a clock tick or more: what Linux's close sends at
		// once (a reset, or the FIN after the data) is sent here first.
		switch {
		case s.closedUnread():
			lklAbort(s.lfd)
			lklResetNow(s.lfd)
		case !conn: // a listener or a connect that never completed: nothing to send
		case linger.on && linger.secs == 0 && !linger.err:
			lklResetNow(s.lfd)
		case !linger.on:
			s.n.waitUnsent(s.lfd)
		default:
			lkl.Syscall6(lkl.SysShutdown, uintptr(s.lfd), unix.SHUT_WR, 0, 0, 0, 0)
		}
	}
	lkl.Close(s.lfd)
	s.n.resetSent(reset)
	s.n.endedAt.Store(time.Now().UnixNano())
	s.settled() // a local peer sees the FIN or reset now
	s.n.lmu.Lock()
	delete(s.n.lsocks, s) // before its end closes: settleListeners polls it
	s.n.lmu.Unlock()
	if s.file != nil { // nil: a stand-in socket's, never renewed
		s.file.Close()
	}
	if s.typ == unix.SOCK_DGRAM {
		s.n.dgrams.Add(-1)
	}
}

// closedUnread says whether the guest closed a connected stream socket
// with data unread in its end: Linux's close then resets the connection
// instead of sending a FIN. The pump from the guest read ECONNRESET from
// kbox's end, or end found it pending there before (unreadClose); else
// kbox's end has it pending now (SO_ERROR, which the call takes).
func (s *Sock) closedUnread() bool {
	s.mu.Lock()
	unread, skip := s.unreadClose, s.listening || s.fresh
	s.mu.Unlock()
	if skip { // a listener's token byte, a stand-in: no connection
		return false
	}
	if !unread {
		v, err := unix.GetsockoptInt(s.kfd, unix.SOL_SOCKET, unix.SO_ERROR)
		unread = err == nil && unix.Errno(v) == unix.ECONNRESET
	}
	return unread
}

// lklAbort makes LKL's close of TCP socket fd reset the connection
// (SO_LINGER on, 0 seconds), as Linux's close does with data unread.
func lklAbort(fd int) {
	b := make([]byte, 8) // struct linger: l_onoff 1, l_linger 0
	binary.NativeEndian.PutUint32(b, 1)
	netCall(lkl.SysSetsockopt, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, lkl.Ptr(b), 8, 0)
	runtime.KeepAlive(b)
}

// lklResetNow resets LKL TCP socket fd's connection at once, as a close
// that resets does (a connect to AF_UNSPEC: the kernel's disconnect, which
// sends the reset for an established connection).
func lklResetNow(fd int) {
	sa := make([]byte, 16) // struct sockaddr: sa_family AF_UNSPEC (0)
	netCall(lkl.SysConnect, uintptr(fd), lkl.Ptr(sa), uintptr(len(sa)), 0, 0, 0)
	runtime.KeepAlive(sa)
}

// unsentWait bounds how long the end of an LKL stream socket waits for
// its unsent data (waitUnsent).
const unsentWait = 60 * time.Second

// lklLinger is an LKL socket's SO_LINGER (struct linger).
type lklLinger struct {
	on   bool
	secs int32
	err  bool // it could not be read
}

// lingerOf reads LKL socket fd's SO_LINGER.
func lingerOf(fd int) lklLinger {
	b := make([]byte, 12) // struct linger (l_onoff, l_linger), then its length
	binary.NativeEndian.PutUint32(b[8:], 8)
	_, le := netCall(lkl.SysGetsockopt, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, lkl.Ptr(b[:8]), lkl.Ptr(b[8:]), 0)
	runtime.KeepAlive(b)
	if le != 0 {
		return lklLinger{err: true, on: true} // as if the guest decided: no wait
	}
	return lklLinger{on: binary.NativeEndian.Uint32(b) != 0, secs: int32(binary.NativeEndian.Uint32(b[4:]))}
}

// waitUnsent waits, up to unsentWait, until LKL stream socket fd has
// sent everything and had it acknowledged, or its connection ended, or
// kbox stops (Stop), when it has nothing unread (end calls it only when
// the guest set no SO_LINGER of its own, which then decides). Closed
// with unsent data, the socket would be orphaned with it, and a kernel
// whose TCP is over its memory bound (net.ipv4.tcp_mem: a few MiB in
// LKL's tens of MiB) aborts an orphan with a reset instead of sending
// (TCPAbortOnMemory): a peer lost the end of what the guest wrote
// before its close (200 connections at once on the guest's loopback,
// each echoing 1 MB: 3 to 7 came up short in each run). Linux's close
// orphans the socket the same way, but a host's bound is a share of its
// RAM. The guest's close returned long ago (its end is a host socket);
// only the goroutine that ends the socket waits, asking LKL's queue
// (SIOCOUTQ) at growing intervals from 0.1 ms, not waiting in LKL. It
// sends the FIN first (shutdown): see below.
func (n *Net) waitUnsent(fd int) {
	if in, le := lklQueue(fd, unix.SIOCINQ); le != 0 || in > 0 {
		return // unread data: Linux's close resets
	}
	out, le := lklQueue(fd, unix.SIOCOUTQ)
	// The FIN goes now, after the data, as Linux's close sends it (end),
	// and the wait below is for its acknowledgement too: a peer
	// acknowledges a FIN at once, where it may delay that of data.
	lkl.Syscall6(lkl.SysShutdown, uintptr(fd), unix.SHUT_WR, 0, 0, 0, 0)
	if le != 0 || out == 0 {
		return
	}
	deadline := time.Now().Add(unsentWait)
	for d := 100 * time.Microsecond; ; d = min(2*d, 50*time.Millisecond) {
		time.Sleep(d)
		out, le := lklQueue(fd, unix.SIOCOUTQ)
		if le != 0 || out == 0 || time.Now().After(deadline) || n.stopping.Load() || !tcpSending(fd) {
			return
		}
	}
}

// tcpSending says whether LKL TCP socket fd may still send, or have its
// FIN acknowledged: established, closing from the other side, or its FIN
// sent and not yet acknowledged (TCP_INFO's state).
func tcpSending(fd int) bool {
	b := make([]byte, 8) // tcpi_state first, then the length at 4
	binary.NativeEndian.PutUint32(b[4:], 1)
	_, le := netCall(lkl.SysGetsockopt, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_INFO, lkl.Ptr(b[:1]), lkl.Ptr(b[4:]), 0)
	runtime.KeepAlive(b)
	if le != 0 {
		return false
	}
	switch b[0] {
	case tcpEstablished, tcpCloseWait, tcpFinWait1, tcpLastAck, tcpClosing:
		return true
	}
	return false
}

// TCP states (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpFinWait1    = 4
	tcpCloseWait   = 8
	tcpLastAck     = 9
	tcpClosing     = 11
)
