package dispatch

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/fifo"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Internet sockets (docs/networking.md, "Sockets and readiness").
//
// A guest's AF_INET or AF_INET6 socket is LKL's socket, so the TCP/IP
// stack the guest talks to is Linux's own. What the guest holds is one
// end of a host socketpair (SOCK_STREAM for a stream socket,
// SOCK_SEQPACKET for a datagram socket: boundaries kept); kbox holds the
// other end and pumps between it and the LKL socket on its own
// goroutines. So read, write, send and recv without addresses, poll,
// select and epoll stay native on a host fd and mix freely with pipes
// and terminals in one wait. What names an address or asks the protocol
// is served on the LKL socket: connect, bind, sendto/sendmsg with an
// address, recvfrom with one, getsockname, getpeername, getsockopt,
// setsockopt.
//
// The pair is found again from any guest fd (dup, fork, SCM_RIGHTS) by
// the inode of the guest's end. A socket ends when the guest's end is
// closed everywhere: kbox's end then reports POLLHUP to the reaper.
//
// Readiness follows the LKL socket: data LKL received is written to
// kbox's end (readable for the guest); a non-blocking connect in
// progress fills the guest end's send buffer, so the guest sees it
// writable only once LKL's connect finished (SO_ERROR says how).

// Inet is the guest's internet sockets; nil in the Engine: no network.
type Inet struct {
	mu    sync.Mutex
	byIno map[uint64]*inetSock
	// Max bounds the internet sockets open at once (0: no bound): each
	// holds a host thread and a kernel task waiting in LKL, and past
	// what LKL's memory holds, LKL can no longer make tasks, kbox's own
	// work in LKL included (unmounting, writing the guest's files
	// back). Beyond it socket and accept fail with ENFILE, as a system
	// whose file table is full.
	Max    int
	reaper int // epoll fd watching kbox's ends for POLLHUP
	once   sync.Once
	eng    atomic.Pointer[Engine] // finds a guest's end again (resetGuest)
	Opened atomic.Uint64
	dgrams atomic.Int64 // datagram sockets open: recvmsg looks for one (inetmsg.go)
	ending atomic.Int64 // sockets the reaper is ending (Drain)
	lmu    sync.Mutex
	lsocks map[*inetSock]bool // the listeners, until their LKL socket is closed (settleListeners)
	ready  lklReady           // LKL's readiness of the sockets (inetready.go)

	stopping   atomic.Bool  // Stop: ending sockets wait no more (waitUnsent)
	endedAt    atomic.Int64 // when kbox last closed an LKL socket (UnixNano): inetBind
	connecting atomic.Int64 // stream sockets connecting (settleLocalPeer)
}

// recentlyEnded says whether kbox closed an LKL socket within the last
// closedSettle: LKL may not have released its port yet (inetBind).
func (n *Inet) recentlyEnded() bool {
	return time.Since(time.Unix(0, n.endedAt.Load())) < closedSettle
}

// Stop ends the waits of the sockets being ended for their unsent data
// (waitUnsent) and waits, at most d, until none is being ended or left
// to end (its guest end closed): no kbox call goes into LKL after kbox
// halts it. kbox calls it once the guest
// has exited, after Drain.
func (n *Inet) Stop(d time.Duration) {
	n.stopping.Store(true)
	n.Drain(d)
}

// Sweep wakes the goroutines waiting for LKL sockets that became ready
// (inetready.go); the user-mode network calls it after a burst of frames
// to or from the guest.
func (n *Inet) Sweep() { n.ready.Sweep() }

// Swept reports how many readiness events the sweeps found, and how many
// of them only the ticker's sweeps did.
func (n *Inet) Swept() (all, byTick uint64) { return n.ready.Swept.Load(), n.ready.ByTick.Load() }

// full reports whether Max internet sockets are open. At the bound it
// first ends the sockets whose guest end is already closed (the reaper
// may not have run yet): a close frees its place at once, as on Linux.
func (n *Inet) full() bool {
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
func (n *Inet) reapPending() bool {
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
func (n *Inet) settleClosed(d time.Duration) bool {
	// The reaper may have the close's event already, its socket not yet
	// counted as ending: anyGone sees it.
	return n.settle(d, func() bool { return n.ending.Load() > 0 || n.anyGone() })
}

// settle ends the sockets whose guest end is closed (reapPending) and
// waits, at most d, while busy says their ends are still in progress. It
// reports whether there was anything to end or wait for.
func (n *Inet) settle(d time.Duration, busy func() bool) bool {
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
func (n *Inet) settleListeners() { n.settle(closedSettle, n.listenerGone) }

// listenerGone says whether a listener's guest end is closed everywhere
// while its LKL socket is still open.
func (n *Inet) listenerGone() bool {
	n.lmu.Lock()
	defer n.lmu.Unlock()
	for s := range n.lsocks {
		if guestGone(s.kfd) {
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
func (n *Inet) settleLocalPeer(peer []byte) {
	if n.connecting.Load() == 0 {
		return
	}
	n.mu.Lock()
	var cs []*inetSock
	for _, c := range n.byIno {
		if c.typ == unix.SOCK_STREAM {
			cs = append(cs, c)
		}
	}
	n.mu.Unlock()
	name := make([]byte, sockaddrStorage+4)
	for _, c := range cs {
		c.mu.Lock()
		connecting := c.connecting
		c.mu.Unlock()
		if !connecting {
			continue
		}
		binary.NativeEndian.PutUint32(name[sockaddrStorage:], sockaddrStorage)
		if _, le := netCall(lkl.SysGetsockname, uintptr(c.lfd), lkl.Ptr(name[:sockaddrStorage]), lkl.Ptr(name[sockaddrStorage:]), 0, 0, 0); le != 0 {
			continue
		}
		l := min(binary.NativeEndian.Uint32(name[sockaddrStorage:]), sockaddrStorage)
		if !bytes.Equal(name[:l], peer) {
			continue
		}
		c.mu.Lock()
		done := c.connDone
		c.mu.Unlock()
		if done != nil {
			n.ready.Sweep() // LKL's connect is done: its waiter learns it now
			await(done, peerSettle)
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

// NewInet makes the table of internet sockets.
func NewInet() (*Inet, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &Inet{byIno: map[uint64]*inetSock{}, lsocks: map[*inetSock]bool{}, reaper: ep}, nil
}

type inetSock struct {
	n      *Inet
	lfd    int // the LKL socket
	kfd    int // kbox's end of the pair
	file   *os.File
	ino    uint64
	family int
	typ    int // SOCK_STREAM or SOCK_DGRAM

	mu             sync.Mutex
	connecting     bool
	connDone       chan struct{} // closed when the connect in progress ended
	connected      bool
	soError        unix.Errno // of a non-blocking connect, or a datagram socket's (deliverError), for SO_ERROR
	junk           int        // bytes in kbox's end put there to hold the guest's end unwritable
	sndbuf         int        // the guest end's send buffer before it was shrunk
	pumping        bool
	toGuest        sync.WaitGroup
	fromGuest      sync.WaitGroup
	qmu            sync.Mutex // the datagrams' sources and kbox's writes into the pair (inetdgram.go)
	srcs           []dgramSrc // what kbox wrote into the pair, in order
	unwritten      int        // 1: the last of srcs waits for room in the pair
	listening      bool
	fresh          bool          // a stream socket neither connected nor listening yet: its pair is a stand-in (renew)
	endOpts        bool          // the guest set an option of its end (timeouts, send buffer, SO_OOBINLINE): renew copies them
	token          bool          // a byte in the guest's end says a connection waits
	taken          chan struct{} // an accept took the token
	closed         bool
	wasReset       bool // LKL's send saw ECONNRESET (recv then reads EOF)
	inConnect      sync.WaitGroup
	fromGuestBytes atomic.Int64  // what the pump read from kbox's end (SIOCOUTQ)
	urgentGen      atomic.Uint64 // the sweeps saw urgent data come (EPOLLPRI; passUrgent)
	hintProc       *Proc         // a process and fd that held the guest's end (guestCopy)
	hintFD         int

	// LKL's readiness (inetready.go): id in the epoll set, a token when
	// the socket may be readable (rdy) or writable (wrdy).
	id        uint64
	rdy, wrdy chan struct{}
	lwait     chan struct{} // a listener's: closed when a connection waits (listenWait)
}

// hint records that process p held the guest's end as fd.
func (s *inetSock) hint(p *Proc, fd int) {
	s.mu.Lock()
	s.hintProc, s.hintFD = p, fd
	s.mu.Unlock()
}

// guestCopy returns a copy of the guest's end, or -1 if it is closed
// everywhere: from the process and fd last seen holding it, else from
// any guest process (findSocketEnd).
func (s *inetSock) guestCopy() int {
	s.mu.Lock()
	p, fd := s.hintProc, s.hintFD
	s.mu.Unlock()
	if p != nil {
		if hfd, err := p.getfd(fd); err == nil {
			var st unix.Stat_t
			if unix.Fstat(hfd, &st) == nil && st.Ino == s.ino {
				return hfd
			}
			unix.Close(hfd)
		}
	}
	if e := s.n.eng.Load(); e != nil {
		return e.findSocketEnd(s.ino)
	}
	return -1
}

func (n *Inet) lookup(ino uint64) *inetSock {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byIno[ino]
}

// inetOf returns the internet socket behind guest fd fd, or nil.
func (e *Engine) inetOf(r *Request, fd uint64) *inetSock {
	if e.Net == nil || isVirtual(r, fd) {
		return nil
	}
	ino, isSock, _ := sockInode(r, fd)
	if !isSock {
		return nil
	}
	return e.Net.lookup(ino)
}

// sockInode says whether host fd fd of the guest is a socket, and its
// inode (the key of an internet socket's pair); EBADF when it is not
// open.
func sockInode(r *Request, fd uint64) (ino uint64, isSock bool, en unix.Errno) {
	hfd, err := r.P.getfd(int(int32(fd)))
	if err != nil {
		return 0, false, unix.EBADF
	}
	defer unix.Close(hfd)
	var st unix.Stat_t
	if unix.Fstat(hfd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return 0, false, 0
	}
	return st.Ino, true, 0
}

// guestEnd is kbox's copy of the guest's end (the caller closes it).
func guestEnd(r *Request, fd uint64) (int, unix.Errno) {
	hfd, err := r.P.getfd(int(int32(fd)))
	if err != nil {
		return -1, unix.EBADF
	}
	return hfd, 0
}

func nonblocking(fd int) bool {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_NONBLOCK != 0
}

// newInet serves socket(2) for AF_INET and AF_INET6: an LKL socket and
// the guest's end of a pair.
func (e *Engine) newInet(r *Request, family, typ, proto int) Result {
	base := typ & 0xf
	kind := base // how the socket is carried: a stream or datagrams
	if family == unix.AF_NETLINK && base == unix.SOCK_RAW {
		kind = unix.SOCK_DGRAM // a netlink socket's raw and datagram types are one
	}
	if kind == unix.SOCK_RAW {
		// Raw internet sockets are not carried: EPERM, Linux's answer to
		// a process without CAP_NET_RAW. ping then falls back to an ICMP
		// datagram socket, which is carried (docs/networking.md, "Ping").
		return errno(unix.EPERM, Emulated)
	}
	if kind != unix.SOCK_STREAM && kind != unix.SOCK_DGRAM {
		return errno(unix.ESOCKTNOSUPPORT, Emulated) // only stream and datagram sockets are carried (docs/networking.md)
	}
	if typ&^(0xf|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) != 0 {
		return errno(unix.EINVAL, LKL)
	}
	if en := useCred(r); en != 0 {
		return errno(en, LKL)
	}
	e.Net.eng.CompareAndSwap(nil, e)
	if e.Net.full() {
		return errno(unix.ENFILE, Emulated)
	}
	// Every LKL socket is non-blocking: connect sends its SYN at once,
	// on the serving thread (inetConnect), and no kbox thread ever waits
	// inside LKL (inetready.go).
	ltyp := base | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK
	lfd, le := lkl.Syscall6(lkl.SysSocket, uintptr(family), uintptr(ltyp), uintptr(proto), 0, 0, 0)
	if le != 0 {
		return errno(le, LKL)
	}
	if kind == unix.SOCK_STREAM {
		// Urgent data in line, where the pump finds it (passUrgent);
		// accepted sockets inherit it.
		one := int32(1)
		lkl.Syscall6(lkl.SysSetsockopt, lfd, unix.SOL_SOCKET, unix.SO_OOBINLINE, lkl.PtrOf(&one), 4, 0)
		runtime.KeepAlive(&one)
	}
	s, gend, en := e.Net.pair(int(lfd), family, kind, typ&unix.SOCK_NONBLOCK != 0)
	if en != 0 {
		lklClose(int(lfd))
		return errno(en, Host)
	}
	defer unix.Close(gend)
	if kind == unix.SOCK_DGRAM {
		s.startPumps(0)
	} else {
		// Until it connects or listens, the guest's end reads EOF at
		// once, as an unconnected TCP socket's read fails at once
		// (renew).
		s.fresh = true
		unix.Shutdown(s.kfd, unix.SHUT_WR)
	}
	gfd, err := r.G.AddFDReply(gend, typ&unix.SOCK_CLOEXEC != 0)
	if err != nil {
		return fail(err, Host) // kbox's end reports POLLHUP: the reaper ends it
	}
	return answered(int64(gfd), LKL)
}

// pairSendBuf is the send buffer asked for the guest's end of a stream
// socket's pair (the kernel doubles it; an unprivileged process gets at
// most the host's net.core.wmem_max, whose default is 212992): with
// the default 208 KiB, a guest writing 64 KiB at a time blocks after
// three writes and is woken for each one the pump reads, about 40% more
// context switches per byte in a bulk send (docs/networking.md, "Bulk
// throughput"). At most this much more host kernel memory per socket,
// and only while the guest writes faster than LKL sends.
const pairSendBuf = 512 << 10

// pair makes the host socketpair of LKL socket lfd and registers it; the
// caller installs the guest's end gend in the guest and closes it.
func (n *Inet) pair(lfd, family, typ int, nonblock bool) (*inetSock, int, unix.Errno) {
	gend, kfd, ino, en := hostPair(typ)
	if en != 0 {
		return nil, -1, en
	}
	if nonblock {
		unix.SetNonblock(gend, true)
	}
	s := &inetSock{n: n, lfd: lfd, kfd: kfd, file: os.NewFile(uintptr(kfd), "inet"), ino: ino, family: family, typ: typ}
	if en := n.ready.add(s); en != 0 {
		s.file.Close()
		unix.Close(gend)
		return nil, -1, en
	}
	n.mu.Lock()
	n.byIno[ino] = s
	n.mu.Unlock()
	n.watch(s)
	n.Opened.Add(1)
	if typ == unix.SOCK_DGRAM {
		n.dgrams.Add(1)
	}
	return s, gend, 0
}

// hostPair makes the host socketpair of an LKL socket of type typ: the
// guest's end gend, kbox's end kfd (non-blocking), and gend's inode.
func hostPair(typ int) (gend, kfd int, ino uint64, en unix.Errno) {
	ptype := unix.SOCK_STREAM
	if typ == unix.SOCK_DGRAM {
		ptype = unix.SOCK_SEQPACKET
	}
	p, err := unix.Socketpair(unix.AF_UNIX, ptype|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, 0, errnoOf(err)
	}
	gend, kfd = p[0], p[1]
	var st unix.Stat_t
	if err := unix.Fstat(gend, &st); err != nil {
		unix.Close(gend)
		unix.Close(kfd)
		return -1, -1, 0, errnoOf(err)
	}
	unix.SetNonblock(kfd, true)
	if typ == unix.SOCK_STREAM {
		unix.SetsockoptInt(gend, unix.SOL_SOCKET, unix.SO_SNDBUF, pairSendBuf)
		// The guest's urgent data stays in the stream (pumpFromGuest).
		unix.SetsockoptInt(kfd, unix.SOL_SOCKET, unix.SO_OOBINLINE, 1)
	}
	return gend, kfd, st.Ino, 0
}

// renew gives stream socket s, at its first connect or listen, the pair
// its data and its listener's token will cross, in place of the guest's
// end so far (guest fd r.Args[0]): a stand-in whose reads gave EOF at
// once (newInet). Before, the pair was the socket's from socket() on, and
// a read before connect waited for ever or said EAGAIN where Linux says
// ENOTCONN at once: Python's ssl.wrap_socket of an unconnected socket
// (it reads one byte to see that nothing came) failed with
// BlockingIOError. The new end takes the old one's place at the same fd
// with its file flags, close-on-exec, timeouts and SO_OOBINLINE. A copy
// of the stand-in the guest made before (dup, fork) still names the
// socket for calls kbox serves, but its reads and writes go nowhere.
// It returns a copy of the guest's end (new or not) for the caller to
// close.
func (e *Engine) renew(r *Request, s *inetSock) (int, unix.Errno) {
	old, en := guestEnd(r, r.Args[0])
	if en != 0 {
		return -1, en
	}
	s.mu.Lock()
	fresh, endOpts := s.fresh, s.endOpts
	s.fresh = false
	s.mu.Unlock()
	if !fresh {
		return old, 0
	}
	defer unix.Close(old)
	gend, kfd, ino, en := hostPair(unix.SOCK_STREAM)
	if en != 0 {
		return -1, en
	}
	if fl, err := unix.FcntlInt(uintptr(old), unix.F_GETFL, 0); err == nil && fl&(unix.O_NONBLOCK|unix.O_ASYNC) != 0 {
		unix.FcntlInt(uintptr(gend), unix.F_SETFL, fl&(unix.O_NONBLOCK|unix.O_ASYNC))
	}
	if endOpts {
		for _, o := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
			if tv, err := unix.GetsockoptTimeval(old, unix.SOL_SOCKET, o); err == nil && (tv.Sec != 0 || tv.Usec != 0) {
				unix.SetsockoptTimeval(gend, unix.SOL_SOCKET, o, tv)
			}
		}
		if v, err := unix.GetsockoptInt(old, unix.SOL_SOCKET, unix.SO_OOBINLINE); err == nil && v != 0 {
			unix.SetsockoptInt(gend, unix.SOL_SOCKET, unix.SO_OOBINLINE, v)
		}
		if v, err := unix.GetsockoptInt(old, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
			unix.SetsockoptInt(gend, unix.SOL_SOCKET, unix.SO_SNDBUF, v/2) // the kernel doubles it
		}
	}
	n := s.n
	// The stand-in leaves the reaper first: the guest's end closing
	// when the new one takes its place must not end the socket.
	unix.EpollCtl(n.reaper, unix.EPOLL_CTL_DEL, s.kfd, nil)
	n.mu.Lock()
	delete(n.byIno, s.ino)
	n.byIno[ino] = s
	oldFile := s.file
	s.mu.Lock()
	s.kfd, s.file, s.ino = kfd, os.NewFile(uintptr(kfd), "inet"), ino
	s.mu.Unlock()
	n.mu.Unlock()
	n.watch(s)
	oldFile.Close()
	fd := int32(r.Args[0])
	if _, err := r.G.AddFD(gend, int(fd), GuestCloexec(r, fd)); err != nil {
		// The guest's fd is still the stand-in, whose other end is
		// closed now: it reads EOF and its writes fail. kbox's new end
		// reports POLLHUP once gend closes: the reaper ends the socket.
		unix.Close(gend)
		return -1, errnoOf(err)
	}
	return gend, 0
}

// watch adds s to the reaper, started with the first socket.
func (n *Inet) watch(s *inetSock) {
	n.once.Do(func() { go n.reap() })
	// No events asked: POLLHUP and POLLERR are always reported. The data
	// is the inode.
	ev := unix.EpollEvent{Fd: int32(uint32(s.ino)), Pad: int32(uint32(s.ino >> 32))}
	unix.EpollCtl(n.reaper, unix.EPOLL_CTL_ADD, s.kfd, &ev)
}

// reap ends the sockets whose guest end is closed everywhere.
func (n *Inet) reap() {
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
func (n *Inet) reapEvents(evs []unix.EpollEvent) {
	for _, ev := range evs {
		ino := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
		n.mu.Lock()
		s := n.byIno[ino]
		delete(n.byIno, ino)
		n.mu.Unlock()
		if s != nil {
			unix.EpollCtl(n.reaper, unix.EPOLL_CTL_DEL, s.kfd, nil)
			n.ending.Add(1)
			go func() {
				s.end()
				n.ending.Add(-1)
			}()
		}
	}
}

// end closes s once its guest end is gone: what the guest wrote last is
// still carried to LKL, then LKL's receive side is shut (waking the pump
// that waits in recv), then both are closed. LKL's close of a TCP socket
// sends its last data and FIN as Linux does.
func (s *inetSock) end() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.fromGuest.Wait()
	// Also aborts a connect in progress (LKL's shutdown of a connecting
	// socket disconnects it), as the guest's close does on Linux. The
	// pump to the guest, a listener's watcher and a connect's wait are
	// woken to see it.
	lkl.Syscall6(lkl.SysShutdown, uintptr(s.lfd), unix.SHUT_RD, 0, 0, 0, 0)
	signal(s.rdy)
	signal(s.wrdy)
	s.toGuest.Wait()
	s.inConnect.Wait()
	s.n.ready.drop(s)
	if s.typ == unix.SOCK_STREAM {
		s.n.waitUnsent(s.lfd)
	}
	lklClose(s.lfd)
	s.n.endedAt.Store(time.Now().UnixNano())
	s.settled() // a local peer sees the FIN or reset now
	s.n.lmu.Lock()
	delete(s.n.lsocks, s) // before its end closes: settleListeners polls it
	s.n.lmu.Unlock()
	s.file.Close()
	if s.typ == unix.SOCK_DGRAM {
		s.n.dgrams.Add(-1)
	}
}

// unsentWait bounds how long the end of an LKL stream socket waits for
// its unsent data (waitUnsent).
const unsentWait = 60 * time.Second

// waitUnsent waits, up to unsentWait, until LKL stream socket fd has
// sent everything and had it acknowledged, or its connection ended, or
// kbox stops (Stop),
// when it has nothing unread and no SO_LINGER of the guest's. Closed
// with unsent data, the socket would be orphaned with it, and a kernel
// whose TCP is over its memory bound (net.ipv4.tcp_mem: a few MiB in
// LKL's tens of MiB) aborts an orphan with a reset instead of sending
// (TCPAbortOnMemory): a peer lost the end of what the guest wrote
// before its close (200 connections at once on the guest's loopback,
// each echoing 1 MB: 3 to 7 came up short in each run). Linux's close
// orphans the socket the same way, but a host's bound is a share of its
// RAM. The guest's close returned long ago (its end is a host socket);
// only the goroutine that ends the socket waits, asking LKL's queue
// (SIOCOUTQ) every few milliseconds, not waiting in LKL.
func (n *Inet) waitUnsent(fd int) {
	if in, le := lklQueue(fd, unix.SIOCINQ); le != 0 || in > 0 {
		return // unread data: Linux's close resets
	}
	b := make([]byte, 12) // struct linger (l_onoff, l_linger), then its length
	binary.NativeEndian.PutUint32(b[8:], 8)
	_, le := netCall(lkl.SysGetsockopt, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, lkl.Ptr(b[:8]), lkl.Ptr(b[8:]), 0)
	runtime.KeepAlive(b)
	if le != 0 || binary.NativeEndian.Uint32(b) != 0 {
		return // the guest's own SO_LINGER decides
	}
	deadline := time.Now().Add(unsentWait)
	for d := time.Millisecond; ; d = min(2*d, 50*time.Millisecond) {
		out, le := lklQueue(fd, unix.SIOCOUTQ)
		if le != 0 || out == 0 || time.Now().After(deadline) || n.stopping.Load() || !tcpSending(fd) {
			return
		}
		time.Sleep(d)
	}
}

// tcpSending says whether LKL TCP socket fd may still send: established
// or closing from the other side (TCP_INFO's state).
func tcpSending(fd int) bool {
	b := make([]byte, 8) // tcpi_state first, then the length at 4
	binary.NativeEndian.PutUint32(b[4:], 1)
	_, le := netCall(lkl.SysGetsockopt, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_INFO, lkl.Ptr(b[:1]), lkl.Ptr(b[4:]), 0)
	runtime.KeepAlive(b)
	return le == 0 && (b[0] == tcpEstablished || b[0] == tcpCloseWait)
}

// TCP states (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpCloseWait   = 8
)

// startPumps starts carrying data both ways, skipping junk bytes first.
func (s *inetSock) startPumps(junk int) {
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
func (s *inetSock) pumpFromGuest(junk int) {
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
	read := func(fd uintptr) bool {
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
		return err != unix.EAGAIN
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
			if s.typ == unix.SOCK_STREAM && !guestGone(s.kfd) {
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
				await(s.wrdy, 0) // LKL's send buffer is full
				continue
			}
			if le != 0 {
				if s.typ == unix.SOCK_STREAM {
					// LKL's connection failed: the guest's end
					// reads what LKL received, then EOF or
					// ECONNRESET (pumpToGuest).
					if le == unix.ECONNRESET {
						s.mu.Lock()
						s.wasReset = true
						s.mu.Unlock()
					}
					return
				}
				break // a datagram LKL refused (no destination): dropped
			}
			if s.typ != unix.SOCK_STREAM {
				break
			}
			off += int(n)
		}
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
func (s *inetSock) passUrgent(seen *uint64, short bool) bool {
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
func (s *inetSock) pumpToGuest() {
	defer s.toGuest.Done()
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	buf := *bp
	addr := make([]byte, sockaddrStorage)
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
			// (inetcmsg.go).
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
			await(s.rdy, 0)
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
func peerShut(kfd int) bool { return endEvents(kfd)&(unix.POLLRDHUP|unix.POLLHUP) != 0 }

// guestGone reports whether the guest's end of kbox's end kfd is closed
// everywhere (POLLHUP), not just shut for writing.
func guestGone(kfd int) bool { return endEvents(kfd)&unix.POLLHUP != 0 }

// endEvents is what poll reports at once of kbox's end kfd, asked for
// POLLIN and POLLRDHUP (0 when it fails).
func endEvents(kfd int) int16 {
	pfd := [1]unix.PollFd{{Fd: int32(kfd), Events: unix.POLLIN | unix.POLLRDHUP}}
	if n, err := unix.Poll(pfd[:], 0); err != nil || n != 1 {
		return 0
	}
	return pfd[0].Revents
}

// resetGuest ends a stream socket that LKL's peer reset: the guest's end
// reads what it holds, then ECONNRESET once, then EOF, as a reset TCP
// socket on Linux. How: a unix stream socket closed with unread data in
// its receive queue gives its peer ECONNRESET; kbox takes a copy of the
// guest's end (found by its inode in the guest's fd tables), writes one
// byte into its own end's queue, and closes its end. The socket is ended
// here (the reaper no longer watches it). It reports false when the
// guest's end was not found (closed meanwhile): the caller ends as for
// EOF.
func (s *inetSock) resetGuest() bool {
	e := s.n.eng.Load()
	if e == nil {
		return false
	}
	gfd := s.guestCopy()
	if gfd < 0 {
		return false
	}
	defer unix.Close(gfd)
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
	signal(s.wrdy)                     // or waiting for room in LKL
	s.fromGuest.Wait()
	unix.SendmsgN(gfd, []byte{0}, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	s.n.ready.drop(s)
	lklClose(s.lfd)
	s.file.Close()
	return true
}

// findSocketEnd returns a copy of the guest's socket whose inode is ino,
// from the first guest process that holds it, or -1.
func (e *Engine) findSocketEnd(ino uint64) int {
	want := "socket:[" + strconv.FormatUint(ino, 10) + "]"
	seen := map[int]bool{}
	for _, p := range *e.procs.Load() {
		if seen[p.Tgid] {
			continue
		}
		seen[p.Tgid] = true
		dir := "/proc/" + strconv.Itoa(p.Tgid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, ent := range ents {
			if l, err := os.Readlink(dir + "/" + ent.Name()); err != nil || l != want {
				continue
			}
			fd, err := strconv.Atoi(ent.Name())
			if err != nil {
				continue
			}
			if hfd, err := p.getfd(fd); err == nil {
				return hfd
			}
		}
	}
	return -1
}

// readInetAddr copies a guest sockaddr for LKL (EINVAL above
// sockaddr_storage, EFAULT).
func readInetAddr(r *Request, addr, alen uint64) ([]byte, unix.Errno) {
	n := int64(int32(alen))
	if n < 0 || n > sockaddrStorage {
		return nil, unix.EINVAL
	}
	b := make([]byte, max(n, 1))
	if n > 0 {
		if err := r.G.Read(addr, b[:n]); err != nil {
			return nil, unix.EFAULT
		}
	}
	return b[:n], 0
}

func ptrOr0(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return lkl.Ptr(b)
}

// inetBind serves bind(2) on an internet socket: LKL's.
func (e *Engine) inetBind(r *Request, s *inetSock) Result {
	a, en := readInetAddr(r, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, LKL)
	}
	if en := useCred(r); en != 0 {
		return errno(en, LKL)
	}
	_, le := lkl.Syscall6(lkl.SysBind, uintptr(s.lfd), ptrOr0(a), uintptr(len(a)), 0, 0, 0)
	if le == unix.EADDRINUSE && (s.n.settleClosed(closedSettle) || s.n.recentlyEnded()) {
		// LKL releases a closed socket's port from a workqueue, a
		// little after its close returns: try again until it has.
		deadline := time.Now().Add(closedSettle)
		for {
			_, le = lkl.Syscall6(lkl.SysBind, uintptr(s.lfd), ptrOr0(a), uintptr(len(a)), 0, 0, 0)
			if le != unix.EADDRINUSE || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	runtime.KeepAlive(a)
	return errno(le, LKL)
}

// inetConnect serves connect(2) on an internet socket. A datagram
// socket's connect is immediate. A stream socket's waits in LKL, on a
// goroutine: the guest waits (blocking) or gets EINPROGRESS and sees its
// end writable when LKL's connect has finished.
func (e *Engine) inetConnect(r *Request, s *inetSock) Result {
	a, en := readInetAddr(r, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, LKL)
	}
	r.Peer = sockaddrString(a)
	if s.typ != unix.SOCK_STREAM {
		_, le := lkl.Syscall6(lkl.SysConnect, uintptr(s.lfd), ptrOr0(a), uintptr(len(a)), 0, 0, 0)
		runtime.KeepAlive(a)
		return errno(le, LKL)
	}
	gfd, en := e.renew(r, s)
	if en != 0 {
		return errno(en, Host)
	}
	s.mu.Lock()
	switch {
	case s.connecting && !nonblocking(gfd):
		// Linux: a blocking connect on a connecting socket (an earlier
		// one interrupted) waits for it and gives its result.
		done := s.connDone
		s.mu.Unlock()
		unix.Close(gfd)
		return e.awaitConnect(r, s, done)
	case s.connecting:
		s.mu.Unlock()
		unix.Close(gfd)
		return errno(unix.EALREADY, LKL)
	case s.connected:
		s.mu.Unlock()
		unix.Close(gfd)
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
	nb := nonblocking(gfd)
	var timeout time.Duration // SO_SNDTIMEO (also set on the guest's end): a blocking connect's limit
	if tv, err := unix.GetsockoptTimeval(gfd, unix.SOL_SOCKET, unix.SO_SNDTIMEO); err == nil && !nb {
		timeout = time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
	}
	s.hint(r.P, int(int32(r.Args[0])))
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
	p := r.G.Defer()
	go func() {
		// The wait looks for a signal itself (watchInterrupt's check,
		// without a goroutine and a ticker of its own per connect).
		// SO_SNDTIMEO ends the wait with EINPROGRESS, as on Linux,
		// to the next interruptTick; LKL's connect goes on.
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
				e.late(func() { p.ReplyErrno(unix.EINPROGRESS) })
				return
			}
			if signalled(p) {
				watching = false
				e.late(func() { p.ReplyErrno(fifo.RestartSys) })
			}
		})
		e.late(func() {
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
		})
	}()
	return deferred(LKL)
}

// handshakeTick bounds how late a connect's wait notices that its
// socket ended (the reaper's shutdown also wakes it).
const handshakeTick = 1000

// awaitHandshake waits for LKL's connect in progress on s to end and
// returns its result: 0, or the error SO_ERROR gives (ECONNABORTED if
// the socket was shut meanwhile without one). A non-nil tick is called
// every interruptTick of the wait.
func (s *inetSock) awaitHandshake(tick func()) unix.Errno {
	every := time.Duration(handshakeTick) * time.Millisecond
	if tick != nil {
		every = interruptTick
	}
	next := time.Now().Add(every)
	for {
		// LKL's poll without waiting; the wait is for wrdy (inetready.go).
		rev, ok := lklPoll(s.lfd, unix.POLLOUT, 0)
		if !ok {
			if d := time.Until(next); d > 0 && await(s.wrdy, d) {
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
func (e *Engine) awaitConnect(r *Request, s *inetSock, done chan struct{}) Result {
	p := r.G.Defer()
	stop := make(chan struct{})
	go e.watchInterrupt(p, stop)
	go func() {
		<-done
		close(stop)
		e.late(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.connected {
				p.Reply(0)
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

// interruptTick is how often a deferred socket call looks for a signal.
const interruptTick = 100 * time.Millisecond

// watchInterrupt answers p with ERESTARTSYS when a signal that would
// interrupt the guest's wait is pending, until stop is closed. In the
// seccomp tier a guest waiting in a notified syscall takes only fatal
// signals (WAIT_KILLABLE_RECV), so kbox looks (/proc/TID/status, as for
// FIFO opens) and answers; the kernel then restarts the call (SA_RESTART)
// or fails it with EINTR, as Linux does. The trap tier interrupts its
// waits itself, and is left out (interruptsItself).
func (e *Engine) watchInterrupt(p Pending, stop <-chan struct{}) {
	if interruptsItself(p) {
		return
	}
	t := time.NewTicker(interruptTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if p.Valid() != nil {
			return
		}
		if signalled(p) {
			e.late(func() { p.ReplyErrno(fifo.RestartSys) })
			return
		}
	}
}

// interruptsItself reports whether p's tier ends a deferred call itself
// when a signal is to be taken (the trap tier: its guest threads block
// host signals but kbox's own kick, which /proc would show as pending).
func interruptsItself(p Pending) bool {
	_, ok := p.(interface{ InterruptsItself() })
	return ok
}

// signalled is fifo.Interrupted for a tier that needs it.
func signalled(p Pending) bool {
	return !interruptsItself(p) && fifo.Interrupted(p.Pid())
}

// holdUnwritable fills the guest end's send buffer (shrunk first) so that
// poll does not report it writable while LKL connects; it returns the
// bytes written, which the pump skips.
func holdUnwritable(gfd int, s *inetSock) int {
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
func (s *inetSock) connectDone(le unix.Errno) {
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

// drain reads the junk back once LKL's connect ended: the guest's end
// turns writable, and SO_ERROR tells how it ended.
func drain(s *inetSock, junk int) {
	buf := make([]byte, 4096)
	for junk > 0 {
		m, err := s.file.Read(buf[:min(junk, len(buf))])
		if err != nil {
			return
		}
		junk -= m
	}
}

// inetName serves getsockname(2) and getpeername(2) from LKL (nr is
// LKL's number).
func (e *Engine) inetName(r *Request, s *inetSock, nr uintptr) Result {
	var lb [4]byte
	if err := r.G.Read(r.Args[2], lb[:]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	glen := int32(binary.NativeEndian.Uint32(lb[:]))
	if glen < 0 {
		return errno(unix.EINVAL, LKL)
	}
	buf := make([]byte, sockaddrStorage)
	alen := make([]byte, 4)
	binary.NativeEndian.PutUint32(alen, sockaddrStorage)
	if _, le := lkl.Syscall6(nr, uintptr(s.lfd), lkl.Ptr(buf), lkl.Ptr(alen), 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	n := binary.NativeEndian.Uint32(alen)
	if err := r.G.Write(r.Args[1], buf[:min(int(n), int(glen))]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	if err := r.G.Write(r.Args[2], alen); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// maxOpt bounds a socket option's value.
const maxOpt = 4096

// inetGetsockopt serves getsockopt(2) from LKL; SO_ERROR also reports a
// non-blocking connect's failure, once.
func (e *Engine) inetGetsockopt(r *Request, s *inetSock) Result {
	level, name := int(int32(r.Args[1])), int(int32(r.Args[2]))
	var lb [4]byte
	if err := r.G.Read(r.Args[4], lb[:]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	glen := int32(binary.NativeEndian.Uint32(lb[:]))
	if glen < 0 {
		return errno(unix.EINVAL, LKL)
	}
	if level == unix.SOL_SOCKET && name == unix.SO_OOBINLINE && s.typ == unix.SOCK_STREAM {
		return sysSockNative(e, r) // the guest's end's (passUrgent)
	}
	if level == unix.SOL_SOCKET && name == unix.SO_ERROR {
		s.mu.Lock()
		se := s.soError
		s.soError = 0
		s.mu.Unlock()
		if se != 0 {
			var v [4]byte
			binary.NativeEndian.PutUint32(v[:], uint32(se))
			n := min(int(glen), 4)
			if r.G.Write(r.Args[3], v[:n]) != nil {
				return errno(unix.EFAULT, LKL)
			}
			binary.NativeEndian.PutUint32(lb[:], uint32(n))
			r.G.Write(r.Args[4], lb[:])
			return ok(0, LKL)
		}
	}
	buf := make([]byte, min(int(glen), maxOpt)+1)
	olen := make([]byte, 4)
	binary.NativeEndian.PutUint32(olen, uint32(len(buf)-1))
	_, le := lkl.Syscall6(lkl.SysGetsockopt, uintptr(s.lfd), uintptr(level), uintptr(name), lkl.Ptr(buf), lkl.Ptr(olen), 0)
	s.settled() // the call held the socket's lock (inetready.go)
	if le != 0 {
		return errno(le, LKL)
	}
	n := min(int(binary.NativeEndian.Uint32(olen)), len(buf)-1)
	if n > 0 && r.G.Write(r.Args[3], buf[:n]) != nil {
		return errno(unix.EFAULT, LKL)
	}
	binary.NativeEndian.PutUint32(olen, uint32(n))
	if r.G.Write(r.Args[4], olen) != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// inetSetsockopt serves setsockopt(2) on LKL's socket; the timeouts of
// reads and writes also go to the guest's end, where those wait.
func (e *Engine) inetSetsockopt(r *Request, s *inetSock) Result {
	level, name, olen := int(int32(r.Args[1])), int(int32(r.Args[2])), int64(int32(r.Args[4]))
	if olen < 0 || olen > maxOpt {
		return errno(unix.EINVAL, LKL)
	}
	buf := make([]byte, olen+1)
	if olen > 0 && r.G.Read(r.Args[3], buf[:olen]) != nil {
		return errno(unix.EFAULT, LKL)
	}
	if en := useCred(r); en != 0 {
		return errno(en, LKL)
	}
	if level == unix.SOL_SOCKET && name == unix.SO_OOBINLINE && s.typ == unix.SOCK_STREAM {
		// Urgent data reaches the guest's end as its own (passUrgent):
		// the guest's choice is that end's; LKL's stays in line.
		s.mu.Lock()
		s.endOpts = true
		s.mu.Unlock()
		return sysSockNative(e, r)
	}
	_, le := lkl.Syscall6(lkl.SysSetsockopt, uintptr(s.lfd), uintptr(level), uintptr(name), lkl.Ptr(buf), uintptr(olen), 0)
	runtime.KeepAlive(buf)
	s.settled() // the call held the socket's lock (inetready.go)
	if le != 0 {
		return errno(le, LKL)
	}
	sndbuf := name == unix.SO_SNDBUF || name == unix.SO_SNDBUFFORCE
	if level == unix.SOL_SOCKET && (name == unix.SO_RCVTIMEO || name == unix.SO_SNDTIMEO || sndbuf && s.typ == unix.SOCK_STREAM) {
		// A send buffer the guest asks for bounds what its writes can
		// queue ahead of LKL's, as on Linux: the pair's own is large
		// (pairSendBuf), and a peer's close in the middle of a send
		// reached a guest that had written everything already
		// (test_asyncio's test_sendfile_close_peer_in_the_middle_of_receiving).
		s.mu.Lock()
		s.endOpts = true
		s.mu.Unlock()
		if gfd, en := guestEnd(r, r.Args[0]); en == 0 {
			if sndbuf {
				unix.SetsockoptString(gfd, level, unix.SO_SNDBUF, string(buf[:olen]))
			} else {
				unix.SetsockoptString(gfd, level, name, string(buf[:olen]))
			}
			unix.Close(gfd)
		}
	}
	return ok(0, LKL)
}

// inetSendto serves sendto(2) with an address: a datagram goes to LKL at
// once; a stream's data goes through the pair, after what the guest
// wrote before (the address is ignored, as TCP does).
func (e *Engine) inetSendto(r *Request, s *inetSock, data []byte, name []byte, flags int) Result {
	if s.typ != unix.SOCK_STREAM && len(name) == 0 && !lklConnected(s.lfd) {
		// No destination: Linux's UDP refuses it. The pair would take
		// it and the pump's send to LKL drop it (Python's
		// test_socket, testSendmsgNoDestAddr). A send or write without
		// an address runs on the host and is not seen
		// (docs/networking.md, "Datagram sources").
		return errno(unix.EDESTADDRREQ, LKL)
	}
	if s.typ == unix.SOCK_STREAM || len(name) == 0 {
		gfd, en := guestEnd(r, r.Args[0])
		if en != 0 {
			return errno(en, Host)
		}
		j := &sendJob{s: sock{fd: gfd, typ: unix.SOCK_STREAM}, data: data, flags: flags}
		if s.typ != unix.SOCK_STREAM {
			j.s.typ = unix.SOCK_SEQPACKET
		}
		return e.send(r, j, nil)
	}
	n, le := lkl.Syscall6(lkl.SysSendto, uintptr(s.lfd), ptrOr0(data), uintptr(len(data)), uintptr(flags|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL), lkl.Ptr(name), uintptr(len(name)))
	runtime.KeepAlive(data)
	runtime.KeepAlive(name)
	s.settled()
	if le != 0 {
		return errno(le, LKL)
	}
	return ok(int64(n), LKL)
}

// lklConnected says whether LKL socket fd has a peer (getpeername).
func lklConnected(fd int) bool {
	var sa [sockaddrStorage]byte
	l := uint32(len(sa))
	_, le := lkl.Syscall6(lkl.SysGetpeername, uintptr(fd), lkl.Ptr(sa[:]), lkl.PtrOf(&l), 0, 0, 0)
	runtime.KeepAlive(&sa)
	return le == 0
}

// inetRecvfrom serves recvfrom(2) with an address on an internet socket:
// the data from the guest's end, the source from the pump's queue.
func (e *Engine) inetRecvfrom(r *Request, s *inetSock) Result {
	if s.typ != unix.SOCK_STREAM {
		return e.inetRecvfromDgram(r, s)
	}
	gfd, en := guestEnd(r, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	// The arguments are copied, and the address's room read, now: a
	// deferred call outlives r.
	flags := int(int32(r.Args[3]))
	bufArg, addrArg, lenArg := r.Args[1], r.Args[4], r.Args[5]
	buf := make([]byte, min(r.Args[2], maxSend))
	glen := -1
	if lenArg != 0 && addrArg != 0 {
		var lb [4]byte
		if err := r.G.Read(lenArg, lb[:]); err != nil {
			unix.Close(gfd)
			return errno(unix.EFAULT, Host)
		}
		if glen = int(int32(binary.NativeEndian.Uint32(lb[:]))); glen < 0 {
			unix.Close(gfd)
			return errno(unix.EINVAL, Host)
		}
	}
	finish := func(n int, err error, write func(uint64, []byte) error) (int64, unix.Errno) {
		if err != nil {
			return 0, errnoOf(err)
		}
		if write(bufArg, buf[:min(n, len(buf))]) != nil {
			return 0, unix.EFAULT
		}
		var a []byte // a stream's recvfrom has no source
		if glen >= 0 {
			// What fits of the address; the length is the full one.
			if glen > 0 && len(a) > 0 && write(addrArg, a[:min(glen, len(a))]) != nil {
				return 0, unix.EFAULT
			}
			var lb [4]byte
			binary.NativeEndian.PutUint32(lb[:], uint32(len(a)))
			if write(lenArg, lb[:]) != nil {
				return 0, unix.EFAULT
			}
		}
		return int64(n), 0
	}
	n, _, _, _, err := unix.Recvmsg(gfd, buf, nil, flags|unix.MSG_DONTWAIT)
	if err != unix.EAGAIN || flags&unix.MSG_DONTWAIT != 0 || nonblocking(gfd) {
		unix.Close(gfd)
		v, en := finish(n, err, r.G.Write)
		if en != 0 {
			return errno(en, Host)
		}
		return ok(v, Host)
	}
	p := r.G.Defer()
	go func() {
		n, _, _, _, err := unix.Recvmsg(gfd, buf, nil, flags)
		unix.Close(gfd)
		e.late(func() {
			v, en := finish(n, err, p.Write)
			if en != 0 {
				p.ReplyErrno(en)
			} else {
				p.Reply(v)
			}
		})
	}()
	return deferred(Host)
}

// sysRecvfrom serves recvfrom(2) with a source address: an internet
// socket's source is LKL's; any other socket runs on the host.
func sysRecvfrom(e *Engine, r *Request) Result {
	if isVirtual(r, r.Args[0]) {
		return sysSockNative(e, r)
	}
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetRecvfrom(r, s)
	}
	return cont
}

// sysSockName serves getsockname(2): LKL's for an internet socket.
func sysSockName(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetName(r, s, lkl.SysGetsockname)
	}
	return sysSockNative(e, r)
}

// sysPeerName serves getpeername(2): LKL's for an internet socket.
func sysPeerName(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetName(r, s, lkl.SysGetpeername)
	}
	return sysSockNative(e, r)
}

// sysGetsockopt serves getsockopt(2): LKL's for an internet socket.
func sysGetsockopt(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetGetsockopt(r, s)
	}
	return sysSockNative(e, r)
}

// sysSetsockopt serves setsockopt(2): LKL's for an internet socket.
func sysSetsockopt(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetSetsockopt(r, s)
	}
	return sysSockNative(e, r)
}

// inetListen serves listen(2) on an internet socket: LKL's listen, the
// LKL socket made non-blocking (accept waits in kbox, never in LKL on the
// serving loop), and a watcher that puts one token byte in the guest's
// end while a connection waits: the guest's end is readable then, as a
// listening socket with a pending connection is.
func (e *Engine) inetListen(r *Request, s *inetSock) Result {
	if s.typ != unix.SOCK_STREAM {
		return errno(unix.EOPNOTSUPP, LKL)
	}
	if _, le := lkl.Syscall6(lkl.SysListen, uintptr(s.lfd), uintptr(int32(r.Args[1])), 0, 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	gfd, en := e.renew(r, s)
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
func (s *inetSock) watchListener() {
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
			await(s.rdy, listenTick*time.Millisecond)
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
func (s *inetSock) listenWait() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lwait
}

// takeToken removes the token from the guest's end gfd after an accept.
func (s *inetSock) takeToken(gfd int) {
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
func (s *inetSock) dropStaleToken(gfd int) {
	s.mu.Lock()
	if s.token && !lklPollIn(s.lfd, 0) {
		var b [1]byte
		if n, _, _ := unix.Recvfrom(gfd, b[:], unix.MSG_DONTWAIT); n == 1 {
			s.token = false
		}
	}
	s.mu.Unlock()
}

// inetAccept serves accept(2) and accept4(2) on an internet socket: LKL's
// accept, and the new socket gets its own pair. A blocking accept waits
// on a goroutine.
func (e *Engine) inetAccept(r *Request, s *inetSock, flags int) Result {
	if flags&^(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) != 0 {
		return errno(unix.EINVAL, LKL)
	}
	s.mu.Lock()
	listening := s.listening
	s.mu.Unlock()
	if !listening {
		return errno(unix.EINVAL, LKL)
	}
	gfd, en := guestEnd(r, r.Args[0])
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
	try := func() (*inetSock, int, []byte, unix.Errno) {
		addr := make([]byte, sockaddrStorage)
		alen := make([]byte, 4)
		binary.NativeEndian.PutUint32(alen, sockaddrStorage)
		if e.Net.full() {
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
		ns, gend, en := e.Net.pair(int(nfd), s.family, unix.SOCK_STREAM, flags&unix.SOCK_NONBLOCK != 0)
		if en != 0 {
			lklClose(int(nfd))
			return nil, -1, nil, en
		}
		a := addr[:min(binary.NativeEndian.Uint32(alen), sockaddrStorage)]
		ns.mu.Lock()
		ns.connected = true
		ns.mu.Unlock()
		ns.startPumps(0)
		e.Net.settleLocalPeer(a)
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
		ns.hint(r.P, nfd)
		return answered(int64(nfd), LKL)
	}
	if le != unix.EAGAIN || nonblocking(gfd) {
		unix.Close(gfd)
		return errno(le, LKL)
	}
	p := r.G.Defer()
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
				e.late(func() { p.ReplyErrno(unix.EBADF) })
				return
			}
			if signalled(p) {
				// A signal to take (seccomp tier: see watchInterrupt).
				e.late(func() { p.ReplyErrno(fifo.RestartSys) })
				return
			}
			if w := s.listenWait(); !lklPollIn(s.lfd, 0) {
				select { // the watcher sees the next connection
				case <-w:
				case <-time.After(acceptTick * time.Millisecond):
				}
				continue
			}
			if p.Valid() != nil {
				continue // (a signal meanwhile: the connection stays for the next accept)
			}
			ns, gend, a, le := try()
			if le == unix.EAGAIN {
				continue
			}
			proc := r.P

			e.late(func() {
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
					p.ReplyErrno(errnoOf(err))
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

// sysListen serves listen(2): LKL's for an internet socket.
func sysListen(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetListen(r, s)
	}
	return sysSockNative(e, r)
}

// sysAccept serves accept(2): LKL's for an internet socket.
func sysAccept(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetAccept(r, s, 0)
	}
	return sysSockNative(e, r)
}

// sysAccept4 serves accept4(2): LKL's for an internet socket.
func sysAccept4(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetAccept(r, s, int(int32(r.Args[3])))
	}
	return sysSockNative(e, r)
}

// sockaddrString is an internet sockaddr as "ADDR:PORT" ("[ADDR]:PORT"
// for IPv6), "" if it is none.
func sockaddrString(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	port := uint16(0)
	if len(b) >= 4 {
		port = binary.BigEndian.Uint16(b[2:4])
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port).String()
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port).String()
		}
	}
	return ""
}
