// Package inet is the guest's internet sockets, served by LKL's network
// stack and bridged to host fds the guest can poll (docs/networking.md,
// "Sockets and readiness"). It holds the sockets' registry, their pairs,
// stand-ins and pumps, and serves the calls the engine's handlers
// (dispatch/sys_net_inet.go) hand it; what it needs of the engine it asks
// through the interfaces of engine.go.
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
package inet

import (
	"encoding/binary"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/lklready"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Net is the guest's internet sockets; nil in the engine: no network.
type Net struct {
	mu    sync.Mutex
	byIno map[uint64]*Sock
	// Max bounds the internet sockets open at once (0: no bound): each
	// holds a host thread and a kernel task waiting in LKL, and past
	// what LKL's memory holds, LKL can no longer make tasks, kbox's own
	// work in LKL included (unmounting, writing the guest's files
	// back). Beyond it socket and accept fail with ENFILE, as a system
	// whose file table is full.
	Max    int
	reaper int // epoll fd watching kbox's ends for POLLHUP
	once   sync.Once
	eng    atomic.Pointer[engineBox] // the engine (Attach): finds a guest's end again (resetGuest)
	Opened atomic.Uint64
	dgrams atomic.Int64 // datagram sockets open: recvmsg looks for one (msg.go)
	ending atomic.Int64 // sockets the reaper is ending (Drain)
	noting atomic.Int64 // of those, the ones not yet past noting a reset (settlePeerReset)
	lmu    sync.Mutex
	lsocks map[*Sock]bool // the listeners, until their LKL socket is closed (settleListeners)
	ready  lklready.Set   // LKL's readiness of the sockets (ready.go, package lklready)
	stands standIns       // fresh stream sockets' stand-ins (standin.go)
	resets recentResets   // the sockets whose close reset their connection lately (reset.go)

	stopping   atomic.Bool  // Stop: ending sockets wait no more (waitUnsent)
	endedAt    atomic.Int64 // when kbox last closed an LKL socket (UnixNano): inetBind
	connecting atomic.Int64 // stream sockets connecting (settleLocalPeer)
}

// Stop ends the waits of the sockets being ended for their unsent data
// (waitUnsent) and waits, at most d, until none is being ended or left
// to end (its guest end closed): no kbox call goes into LKL after kbox
// halts it. kbox calls it once the guest
// has exited, after Drain.
func (n *Net) Stop(d time.Duration) {
	n.stopping.Store(true)
	n.Drain(d)
}

// Sweep wakes the goroutines waiting for LKL sockets that became ready
// (ready.go); the user-mode network calls it after a burst of frames
// to or from the guest.
func (n *Net) Sweep() { n.ready.Sweep() }

// Swept reports how many readiness events the sweeps found, and how many
// of them only the ticker's sweeps did.
func (n *Net) Swept() (all, byTick uint64) { return n.ready.Swept.Load(), n.ready.ByTick.Load() }

// New makes the table of internet sockets.
func New() (*Net, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	n := &Net{byIno: map[uint64]*Sock{}, lsocks: map[*Sock]bool{}, reaper: ep}
	n.stands.fd.Store(-1)
	return n, nil
}

type Sock struct {
	n      *Net
	lfd    int // the LKL socket
	kfd    int // kbox's end of the pair; -1 while the guest's fd is a stand-in socket (standin.go)
	file   *os.File
	ino    uint64
	family int
	typ    int // how it is carried: SOCK_STREAM, or SOCK_DGRAM (datagram, raw and netlink sockets)

	mu             sync.Mutex
	connecting     bool
	connDone       chan struct{} // closed when the connect in progress ended
	connected      bool
	unseen         bool       // connected by a connect whose end no connect call reported yet: the next connect gives 0, not EISCONN
	soError        unix.Errno // of a non-blocking connect, or a datagram socket's (deliverError), for SO_ERROR
	refusalGiven   bool       // a connect's answer was its error: LKL's socket still says connecting, Linux's is unconnected
	junk           int        // bytes in kbox's end put there to hold the guest's end unwritable
	sndbuf         int        // the guest end's send buffer before it was shrunk
	pumping        bool
	toGuest        sync.WaitGroup
	fromGuest      sync.WaitGroup
	outMu          sync.Mutex  // held by the pump from the guest while a chunk it read is not yet LKL's (more.go)
	outWaiting     atomic.Bool // the pump from the guest waits for room in LKL's send buffer
	qmu            sync.Mutex  // the datagrams' sources and kbox's writes into the pair (dgram.go)
	srcs           []dgramSrc  // what kbox wrote into the pair, in order
	unwritten      int         // 1: the last of srcs waits for room in the pair
	listening      bool
	fresh          bool          // a stream socket neither connected nor listening yet: the guest's fd is a stand-in (renew)
	endOpts        bool          // the guest set an option of its end (timeouts, send buffer, SO_OOBINLINE): renew copies them
	sndbufSet      bool          // the guest set SO_SNDBUF (renew copies it; a stand-in socket's own is TCP's default)
	token          bool          // a byte in the guest's end says a connection waits
	taken          chan struct{} // an accept took the token
	closed         bool
	wasReset       bool // LKL's send saw ECONNRESET or EPIPE (recv then reads EOF)
	toGuestEOF     bool // the pump to the guest ended with EOF, not a reset (sendFailed)
	unreadClose    bool // the guest closed its end with data unread: LKL's close resets, and the pump from the guest stops waiting for room in LKL (end)
	inConnect      sync.WaitGroup
	fromGuestBytes atomic.Int64  // what the pump read from kbox's end (SIOCOUTQ)
	urgentGen      atomic.Uint64 // the sweeps saw urgent data come (EPOLLPRI; passUrgent)
	hintProc       Holder        // a process and fd that held the guest's end (guestCopy)
	hintFD         int

	// LKL's readiness (ready.go): id in the epoll set, a token when
	// the socket may be readable (rdy) or writable (wrdy).
	id        uint64
	rdy, wrdy chan struct{}
	lwait     chan struct{} // a listener's: closed when a connection waits (listenWait)
}

// hint records that process p held the guest's end as fd.
func (s *Sock) hint(p Holder, fd int) {
	s.mu.Lock()
	s.hintProc, s.hintFD = p, fd
	s.mu.Unlock()
}

// guestCopy returns a copy of the guest's end, or -1 if it is closed
// everywhere: from the process and fd last seen holding it, else from
// any guest process (Engine.FindSocket).
func (s *Sock) guestCopy() int {
	s.mu.Lock()
	p, fd := s.hintProc, s.hintFD
	s.mu.Unlock()
	if p != nil {
		if hfd, err := p.FD(fd); err == nil {
			var st unix.Stat_t
			if unix.Fstat(hfd, &st) == nil && st.Ino == s.ino {
				return hfd
			}
			unix.Close(hfd)
		}
	}
	if e := s.n.engine(); e != nil {
		return e.FindSocket(s.ino)
	}
	return -1
}

// Lookup returns the internet socket whose guest end has inode ino, or
// nil.
func (n *Net) Lookup(ino uint64) *Sock {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byIno[ino]
}

// GuestEnd is kbox's copy of the guest's end, its fd fd of holder h
// (the caller closes it): EBADF when h has no such fd.
func GuestEnd(h Holder, fd uint64) (int, unix.Errno) {
	hfd, err := h.FD(int(int32(fd)))
	if err != nil {
		return -1, unix.EBADF
	}
	return hfd, 0
}

// Socket serves socket(2) for AF_INET and AF_INET6: an LKL socket and
// the guest's end of a pair.
func (n *Net) Socket(r *Req, family, typ, proto int) Result {
	base := typ & 0xf
	// Linux: flags other than SOCK_NONBLOCK and SOCK_CLOEXEC, or a type
	// past SOCK_PACKET, are EINVAL before the family looks at the type.
	if typ&^(0xf|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) != 0 || base > unix.SOCK_PACKET {
		return errno(unix.EINVAL, LKL)
	}
	kind := base // how the socket is carried: a stream or datagrams
	if family == unix.AF_NETLINK && base == unix.SOCK_RAW {
		kind = unix.SOCK_DGRAM // a netlink socket's raw and datagram types are one
	}
	if kind == unix.SOCK_RAW {
		// A raw internet socket is LKL's, carried as datagrams are: LKL
		// asks CAP_NET_RAW of the guest's credentials (useCred below),
		// so guest root has it and another user gets EPERM, as on
		// Linux. What it sends leaves through LKL's stack, where the
		// user-mode network and its policy end every flow
		// (docs/networking.md, "Ping").
		kind = unix.SOCK_DGRAM
	}
	if kind != unix.SOCK_STREAM && kind != unix.SOCK_DGRAM {
		return errno(unix.ESOCKTNOSUPPORT, Emulated) // only stream and datagram sockets are carried (docs/networking.md)
	}
	if en := r.G.UseCred(); en != 0 {
		return errno(en, LKL)
	}
	if n.full() {
		return errno(unix.ENFILE, Emulated)
	}
	// Every LKL socket is non-blocking: connect sends its SYN at once,
	// on the serving thread (inetConnect), and no kbox thread ever waits
	// inside LKL (ready.go).
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
	nonblock := typ&unix.SOCK_NONBLOCK != 0
	var s *Sock
	var gend int
	var en unix.Errno = unix.ENOSYS
	if kind == unix.SOCK_STREAM {
		// Until it connects or listens, the guest's fd is an
		// unconnected host TCP socket: Linux's errors for its reads
		// and writes (standin.go).
		s, gend, en = n.standIn(int(lfd), family, nonblock)
	}
	if en != 0 {
		s, gend, en = n.pair(int(lfd), family, kind, nonblock)
	}
	if en != 0 {
		lkl.Close(int(lfd))
		return errno(en, Host)
	}
	defer unix.Close(gend)
	if base == unix.SOCK_DGRAM && isUDP(family, proto) {
		udpSendBuf(gend, family)
	}
	switch {
	case kind == unix.SOCK_DGRAM:
		s.startPumps(0)
	case s.kfd >= 0:
		// No stand-in socket to be had: until it connects or listens,
		// the pair's guest end reads EOF at once (renew).
		s.fresh = true
		unix.Shutdown(s.kfd, unix.SHUT_WR)
	}
	gfd, err := r.G.AddFDReply(gend, typ&unix.SOCK_CLOEXEC != 0)
	if err != nil {
		return fail(err, Host) // kbox's end reports POLLHUP: the reaper ends it
	}
	return answered(int64(gfd), LKL)
}

func ptrOr0(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return lkl.Ptr(b)
}

// Bind serves bind(2) on an internet socket: LKL's.
func (s *Sock) Bind(r *Req) Result {
	a, en := ReadAddr(r.G, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, LKL)
	}
	if en := r.G.UseCred(); en != 0 {
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

// Name serves getsockname(2) and getpeername(2) from LKL (nr is
// LKL's number).
func (s *Sock) Name(r *Req, nr uintptr) Result {
	var lb [4]byte
	if err := r.G.Read(r.Args[2], lb[:]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	glen := int32(binary.NativeEndian.Uint32(lb[:]))
	if glen < 0 {
		return errno(unix.EINVAL, LKL)
	}
	if nr == lkl.SysGetpeername && s.settlePeerReset() {
		return errno(unix.ENOTCONN, LKL) // reset and ended: no LKL socket now
	}
	buf := make([]byte, sysabi.SockaddrStorage)
	alen := make([]byte, 4)
	binary.NativeEndian.PutUint32(alen, sysabi.SockaddrStorage)
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

// Getsockopt serves getsockopt(2) from LKL; SO_ERROR also reports a
// non-blocking connect's failure, once.
func (s *Sock) Getsockopt(r *Req) Result {
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
		return native() // the guest's end's (passUrgent)
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
	s.settled() // the call held the socket's lock (ready.go)
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

// Setsockopt serves setsockopt(2) on LKL's socket; the timeouts of
// reads and writes also go to the guest's end, where those wait.
func (s *Sock) Setsockopt(r *Req) Result {
	level, name, olen := int(int32(r.Args[1])), int(int32(r.Args[2])), int64(int32(r.Args[4]))
	if olen < 0 || olen > maxOpt {
		return errno(unix.EINVAL, LKL)
	}
	buf := make([]byte, olen+1)
	if olen > 0 && r.G.Read(r.Args[3], buf[:olen]) != nil {
		return errno(unix.EFAULT, LKL)
	}
	if en := r.G.UseCred(); en != 0 {
		return errno(en, LKL)
	}
	if level == unix.SOL_SOCKET && name == unix.SO_OOBINLINE && s.typ == unix.SOCK_STREAM {
		// Urgent data reaches the guest's end as its own (passUrgent):
		// the guest's choice is that end's; LKL's stays in line.
		s.mu.Lock()
		s.endOpts = true
		s.mu.Unlock()
		return native()
	}
	_, le := lkl.Syscall6(lkl.SysSetsockopt, uintptr(s.lfd), uintptr(level), uintptr(name), lkl.Ptr(buf), uintptr(olen), 0)
	runtime.KeepAlive(buf)
	s.settled() // the call held the socket's lock (ready.go)
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
		s.sndbufSet = s.sndbufSet || sndbuf
		s.mu.Unlock()
		if gfd, en := GuestEnd(r.G, r.Args[0]); en == 0 {
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

// lklConnected says whether LKL socket fd has a peer (getpeername).
func lklConnected(fd int) bool {
	var sa [sysabi.SockaddrStorage]byte
	l := uint32(len(sa))
	_, le := lkl.Syscall6(lkl.SysGetpeername, uintptr(fd), lkl.Ptr(sa[:]), lkl.PtrOf(&l), 0, 0, 0)
	runtime.KeepAlive(&sa)
	return le == 0
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

// Stream says whether s is a stream socket (else it carries datagrams:
// datagram, raw and netlink sockets).
func (s *Sock) Stream() bool { return s.typ == unix.SOCK_STREAM }

// LKLFD is s's LKL socket, for a call that only asks LKL about it (a
// device ioctl, an xattr).
func (s *Sock) LKLFD() int { return s.lfd }

// AnyDatagram says whether a datagram socket is open.
func (n *Net) AnyDatagram() bool { return n.dgrams.Load() > 0 }

// NoDest says whether a send without an address on s has no destination
// (a datagram socket with no peer in LKL): Linux's UDP refuses it with
// EDESTADDRREQ. The pair would take it and the pump's send to LKL drop it
// (Python's test_socket, testSendmsgNoDestAddr).
func (s *Sock) NoDest(name []byte) bool {
	return s.typ != unix.SOCK_STREAM && len(name) == 0 && !lklConnected(s.lfd)
}

// SendTo sends data to name (not empty) on datagram socket s, in LKL at
// once.
func (s *Sock) SendTo(data, name []byte, flags int) Result {
	n, le := lkl.Syscall6(lkl.SysSendto, uintptr(s.lfd), ptrOr0(data), uintptr(len(data)), uintptr(flags|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL), lkl.Ptr(name), uintptr(len(name)))
	runtime.KeepAlive(data)
	runtime.KeepAlive(name)
	s.settled()
	if le != 0 {
		return errno(le, LKL)
	}
	return ok(int64(n), LKL)
}

// Watched says whether a host socket of the guest (its inode ino) is
// watched until its close: found, and then whether it is a stream
// socket's stand-in left after renew (a copy the guest made before the
// first connect or listen; else the guest's end of a reset socket).
func (n *Net) Watched(ino uint64) (found, standIn bool) {
	if n.stands.fd.Load() < 0 {
		return false, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	si := n.stands.byIno[ino]
	return si != nil, si != nil && si.s != nil
}
