package dispatch

import (
	"encoding/binary"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/lklready"
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
	noting atomic.Int64 // of those, the ones not yet past noting a reset (settlePeerReset)
	lmu    sync.Mutex
	lsocks map[*inetSock]bool // the listeners, until their LKL socket is closed (settleListeners)
	ready  lklready.Set       // LKL's readiness of the sockets (inetready.go)
	stands standIns           // fresh stream sockets' stand-ins (inetstandin.go)
	resets recentResets       // the sockets whose close reset their connection lately (inetreset.go)

	stopping   atomic.Bool  // Stop: ending sockets wait no more (waitUnsent)
	endedAt    atomic.Int64 // when kbox last closed an LKL socket (UnixNano): inetBind
	connecting atomic.Int64 // stream sockets connecting (settleLocalPeer)
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

// NewInet makes the table of internet sockets.
func NewInet() (*Inet, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	n := &Inet{byIno: map[uint64]*inetSock{}, lsocks: map[*inetSock]bool{}, reaper: ep}
	n.stands.fd.Store(-1)
	return n, nil
}

type inetSock struct {
	n      *Inet
	lfd    int // the LKL socket
	kfd    int // kbox's end of the pair; -1 while the guest's fd is a stand-in socket (inetstandin.go)
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
	junk           int        // bytes in kbox's end put there to hold the guest's end unwritable
	sndbuf         int        // the guest end's send buffer before it was shrunk
	pumping        bool
	toGuest        sync.WaitGroup
	fromGuest      sync.WaitGroup
	qmu            sync.Mutex // the datagrams' sources and kbox's writes into the pair (inetdgram.go)
	srcs           []dgramSrc // what kbox wrote into the pair, in order
	unwritten      int        // 1: the last of srcs waits for room in the pair
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

// newInet serves socket(2) for AF_INET and AF_INET6: an LKL socket and
// the guest's end of a pair.
func (e *Engine) newInet(r *Request, family, typ, proto int) Result {
	base := typ & 0xf
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
	nonblock := typ&unix.SOCK_NONBLOCK != 0
	var s *inetSock
	var gend int
	var en unix.Errno = unix.ENOSYS
	if kind == unix.SOCK_STREAM {
		// Until it connects or listens, the guest's fd is an
		// unconnected host TCP socket: Linux's errors for its reads
		// and writes (inetstandin.go).
		s, gend, en = e.Net.standIn(int(lfd), family, nonblock)
	}
	if en != 0 {
		s, gend, en = e.Net.pair(int(lfd), family, kind, nonblock)
	}
	if en != 0 {
		lklClose(int(lfd))
		return errno(en, Host)
	}
	defer unix.Close(gend)
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
	if nr == lkl.SysGetpeername && s.settlePeerReset() {
		return errno(unix.ENOTCONN, LKL) // reset and ended: no LKL socket now
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
		s.sndbufSet = s.sndbufSet || sndbuf
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
	limit := rcvTimeout(gfd)
	p := deferWait(r, limit > 0, true)
	go func() {
		n, rerr, answer := recvTicks(p, gfd, buf, flags, limit)
		unix.Close(gfd)
		if !answer {
			return
		}
		var err error
		if rerr != 0 {
			err = rerr
		}
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

// sysPeerName serves getpeername(2): LKL's for an internet socket;
// ENOTCONN for one that was reset and ended (inetreset.go).
func sysPeerName(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetName(r, s, lkl.SysGetpeername)
	}
	if si := e.watched(r, r.Args[0]); si != nil && si.s == nil {
		return errno(unix.ENOTCONN, LKL)
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
