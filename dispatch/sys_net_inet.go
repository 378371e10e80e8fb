// The net family's handlers of internet sockets, which call package inet
// (FamNet in table.go).

package dispatch

import (
	"encoding/binary"
	"os"
	"slices"
	"strconv"

	"github.com/kbox-project/kbox/inet"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The handlers of the guest's internet sockets: they find the socket
// behind the guest's fd and hand the call to package inet, which serves
// it in LKL and bridges it to the guest's host fd (docs/networking.md).
// What inet needs of the engine it asks through the interfaces it
// defines (inet.Call, inet.Pending, inet.Engine), implemented here.

// newInet serves socket(2) for AF_INET, AF_INET6 and AF_NETLINK: an LKL
// socket and the guest's host fd (inet.Net.Socket).
func (e *Engine) newInet(r *Request, family, typ, proto int) Result {
	e.Net.Attach((*inetEngine)(e))
	return e.inetCall(r, func(q *inet.Req) inet.Result { return e.Net.Socket(q, family, typ, proto) })
}

// inetCall runs f, inet's side of guest call r, and gives its answer as
// the engine's.
func (e *Engine) inetCall(r *Request, f func(*inet.Req) inet.Result) Result {
	q := inet.Req{Args: r.Args, G: (*inetGuest)(r)}
	res := f(&q)
	if q.Peer != "" {
		r.Peer = q.Peer
	}
	switch res.Action {
	case inet.Native:
		return sysSockNative(e, r)
	case inet.Answered:
		return answered(res.Val, Disposition(res.Disp))
	case inet.Deferred:
		return deferred(Disposition(res.Disp))
	}
	return Result{Val: res.Val, Errno: res.Errno, Disp: Disposition(res.Disp)}
}

// inetGuest is a guest call as inet sees it (inet.Call).
type inetGuest Request

func (g *inetGuest) Read(addr uint64, b []byte) error  { return g.G.Read(addr, b) }
func (g *inetGuest) Write(addr uint64, b []byte) error { return g.G.Write(addr, b) }
func (g *inetGuest) FD(fd int) (int, error)            { return g.P.getfd(fd) }
func (g *inetGuest) Holder() inet.Holder {
	if g.P == nil {
		return nil // no process: none to find the fd in again
	}
	return (*procFDs)(g.P)
}
func (g *inetGuest) UseCred() unix.Errno { return useCred((*Request)(g)) }
func (g *inetGuest) AddFDReply(hostfd int, cloexec bool) (int, error) {
	return g.G.AddFDReply(hostfd, cloexec)
}
func (g *inetGuest) Replace(hostfd, fd int) error {
	_, err := g.G.AddFD(hostfd, fd, GuestCloexec((*Request)(g), int32(fd)))
	return err
}
func (g *inetGuest) Defer(timeout, coop bool) inet.Pending {
	return inetPending{deferWait((*Request)(g), timeout, coop)}
}

// procFDs is a guest process whose fds inet copies (inet.Holder).
type procFDs Proc

func (p *procFDs) FD(fd int) (int, error) { return (*Proc)(p).getfd(fd) }

// inetPending is a deferred call as inet sees it (inet.Pending).
type inetPending struct{ Pending }

func (p inetPending) Signalled() bool { return signalled(p.Pending) }

// claimer is a Pending a signal can abandon (the in-process tiers'); the
// seccomp tier's guest takes no signal in a notified call, and needs no
// claim.
type claimer interface {
	Claim() bool
	Release()
}

func (p inetPending) Claim() bool {
	if c, ok := p.Pending.(claimer); ok {
		return c.Claim()
	}
	return p.Valid() == nil
}

func (p inetPending) Release() {
	if c, ok := p.Pending.(claimer); ok {
		c.Release()
	}
}

// inetEngine is the engine as inet sees it (inet.Engine).
type inetEngine Engine

func (e *inetEngine) Late(answer func())                { (*Engine)(e).late(answer) }
func (e *inetEngine) IntrErrno(timeout bool) unix.Errno { return intrErrno(timeout) }
func (e *inetEngine) FindSocket(ino uint64) int         { return (*Engine)(e).findSocketEnd(ino) }
func (e *inetEngine) WatchInterrupt(p inet.Pending, stop <-chan struct{}) {
	(*Engine)(e).watchInterrupt(p.(inetPending).Pending, stop)
}

// inetOf returns the internet socket behind guest fd fd, or nil.
func (e *Engine) inetOf(r *Request, fd uint64) *inet.Sock {
	if e.Net == nil || isVirtual(r, fd) {
		return nil
	}
	ino, isSock, _ := sockInode(r, fd)
	if !isSock {
		return nil
	}
	return e.Net.Lookup(ino)
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
	return inet.ReadAddr(r.G, addr, alen)
}

// inetSendto serves sendto(2) with an address: a datagram goes to LKL at
// once; a stream's data goes through the pair, after what the guest
// wrote before (the address is ignored, as TCP does).
func (e *Engine) inetSendto(r *Request, s *inet.Sock, data []byte, name []byte, flags int) Result {
	if s.NoDest(name) {
		// A send or write without an address runs on the host and is
		// not seen (docs/networking.md, "Datagram sources").
		return errno(unix.EDESTADDRREQ, LKL)
	}
	if s.Stream() || len(name) == 0 {
		corked := 0
		if flags&unix.MSG_MORE != 0 {
			// LKL's socket, with MSG_MORE, once the pair is
			// empty (inet/more.go).
			n, le, sent := s.SendMore(data, flags)
			switch {
			case sent && le != 0:
				return errno(le, LKL)
			case sent && n == len(data):
				return ok(int64(n), LKL)
			case sent:
				corked, data = n, data[n:] // a stream's rest: the pair's
			}
		}
		gfd, en := inet.GuestEnd((*procFDs)(r.P), r.Args[0])
		if en != 0 {
			return sentOr(corked, en)
		}
		j := &sendJob{s: sock{fd: gfd, typ: unix.SOCK_STREAM}, data: data, flags: flags}
		if !s.Stream() {
			j.s.typ = unix.SOCK_SEQPACKET
		}
		if corked == 0 {
			return e.send(r, j, nil)
		}
		res := e.send(r, j, func(p Pending, n int, en unix.Errno) { p.Reply(int64(corked + n)) })
		if res.Action != Deferred {
			res = ok(int64(corked)+max(res.Val, 0), Host)
		}
		return res
	}
	return e.inetResult(s.SendTo(data, name, flags))
}

// inetResult is inet's answer of a call that neither defers nor goes
// native, as the engine's.
func (e *Engine) inetResult(res inet.Result) Result {
	return Result{Val: res.Val, Errno: res.Errno, Disp: Disposition(res.Disp)}
}

// inetRecvfrom serves recvfrom(2) with an address on an internet socket:
// the data from the guest's end, the source from the pump's queue.
func (e *Engine) inetRecvfrom(r *Request, s *inet.Sock) Result {
	if !s.Stream() || int(int32(r.Args[3]))&unix.MSG_ERRQUEUE != 0 {
		// A stream's error queue is LKL's too (EAGAIN when empty):
		// the pair holds only the stream's data.
		return e.inetCall(r, s.RecvfromDgram)
	}
	gfd, en := inet.GuestEnd((*procFDs)(r.P), r.Args[0])
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
			return 0, sysabi.Errno(err)
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
	if err != unix.EAGAIN || flags&unix.MSG_DONTWAIT != 0 || sysabi.Nonblocking(gfd) {
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

// sysRecvfrom serves recvfrom(2) with a source address.
func sysRecvfrom(e *Engine, r *Request) Result {
	// An internet socket's source is LKL's; any other socket runs on the
	// host.
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
		return e.inetCall(r, func(q *inet.Req) inet.Result { return s.Name(q, lkl.SysGetsockname) })
	}
	return sysSockNative(e, r)
}

// sysPeerName serves getpeername(2) of internet sockets.
func sysPeerName(e *Engine, r *Request) Result {
	// LKL's for an internet socket; ENOTCONN for one that was reset and
	// ended (inet/reset.go).
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetCall(r, func(q *inet.Req) inet.Result { return s.Name(q, lkl.SysGetpeername) })
	}
	if found, standIn := e.watched(r, r.Args[0]); found && !standIn {
		return errno(unix.ENOTCONN, LKL)
	}
	return sysSockNative(e, r)
}

// sysGetsockopt serves getsockopt(2): LKL's for an internet socket.
func sysGetsockopt(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetCall(r, s.Getsockopt)
	}
	if opt := int32(r.Args[2]); int32(r.Args[1]) == unix.SOL_SOCKET && (opt == unix.SO_PEERCRED || opt == soPeerPidfd) {
		return e.peerCred(r) // peercred.go
	}
	return sysSockNative(e, r)
}

// sysSetsockopt serves setsockopt(2): LKL's for an internet socket.
func sysSetsockopt(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetCall(r, s.Setsockopt)
	}
	return sysSockNative(e, r)
}

// sysListen serves listen(2): LKL's for an internet socket.
func sysListen(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetCall(r, s.Listen)
	}
	if e.standInLeft(r, r.Args[0]) {
		// A copy of a renewed socket's stand-in: the host's listen would
		// bind a port of the host's (inet/standin.go).
		return errno(unix.EINVAL, Emulated)
	}
	return sysSockNative(e, r)
}

// sysAccept serves accept(2): LKL's for an internet socket.
func sysAccept(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetCall(r, func(q *inet.Req) inet.Result { return s.Accept(q, 0) })
	}
	return sysSockNative(e, r)
}

// sysAccept4 serves accept4(2): LKL's for an internet socket.
func sysAccept4(e *Engine, r *Request) Result {
	if s := e.inetOf(r, r.Args[0]); s != nil {
		return e.inetCall(r, func(q *inet.Req) inet.Result { return s.Accept(q, int(int32(r.Args[3]))) })
	}
	return sysSockNative(e, r)
}

// inetDgram returns the internet datagram socket behind guest fd fd, or
// nil (then the call is continued: a stream's recvmsg has no name, as
// TCP's, and runs natively).
func (e *Engine) inetDgram(r *Request, fd uint64) *inet.Sock {
	if e.Net == nil || !e.Net.AnyDatagram() {
		return nil // none open: no fd to look at
	}
	if s := e.inetOf(r, fd); s != nil && !s.Stream() {
		return s
	}
	return nil
}

// sysRecvmsg serves recvmsg(2) of internet datagram sockets.
func sysRecvmsg(e *Engine, r *Request) Result {
	// An internet datagram socket's source is LKL's; any other socket's call
	// runs on the host.
	if isVirtual(r, r.Args[0]) {
		return sysSockNative(e, r)
	}
	s := e.inetDgram(r, r.Args[0])
	if s == nil && int(int32(r.Args[2]))&unix.MSG_ERRQUEUE != 0 {
		// A stream's error queue is LKL's too: the pair's recvmsg
		// would take stream data for it.
		s = e.inetOf(r, r.Args[0])
	}
	if s == nil {
		return cont
	}
	return e.inetCall(r, s.Recvmsg)
}

// sysRecvmmsg serves recvmmsg(2) as recvmsg, one datagram after another.
func sysRecvmmsg(e *Engine, r *Request) Result {
	// Each datagram comes with its source; a blocking call waits for each
	// unless MSG_WAITFORONE, and the timeout is looked at after each
	// datagram, as Linux does.
	if isVirtual(r, r.Args[0]) {
		return sysSockNative(e, r)
	}
	s := e.inetDgram(r, r.Args[0])
	if s == nil {
		return cont
	}
	return e.inetCall(r, s.Recvmmsg)
}

// sysIoctl's internet part: FIONREAD (SIOCINQ) and SIOCOUTQ of an
// internet socket, SIOCATMARK of a datagram socket; other commands and
// fds are continued.
func (e *Engine) inetIoctl(r *Request) (Result, bool) {
	if e.Net == nil || !slices.Contains(NetIoctls, uint32(r.Args[1])) {
		return Result{}, false
	}
	s := e.inetOf(r, r.Args[0])
	if s == nil {
		return Result{}, false
	}
	if uint32(r.Args[1]) == unix.SIOCATMARK {
		if s.Stream() {
			return Result{}, false // the pair keeps the urgent mark (inet/pump.go)
		}
		return errno(unix.ENOTTY, LKL), true // UDP has no such ioctl
	}
	v, en := s.Queued(&inet.Req{Args: r.Args, G: (*inetGuest)(r)}, uint32(r.Args[1]))
	if en != 0 {
		return errno(en, LKL), true
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(v))
	if r.G.Write(r.Args[2], b[:]) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	return ok(0, LKL), true
}

// standInLeft says whether guest fd fd is a stand-in whose socket was
// renewed: a copy the guest made before the first connect or listen.
// The host kernel must never listen on it (it would bind one of the
// host's ports); its reads and writes still fail as an unconnected
// socket's.
func (e *Engine) standInLeft(r *Request, fd uint64) bool {
	_, standIn := e.watched(r, fd)
	return standIn
}

// watched says whether guest fd fd is watched until its close (a
// stand-in left after renew, or a reset socket's end), and whether it is
// a stand-in (inet.Net.Watched).
func (e *Engine) watched(r *Request, fd uint64) (found, standIn bool) {
	if e.Net == nil || isVirtual(r, fd) {
		return false, false
	}
	ino, isSock, _ := sockInode(r, fd)
	if !isSock {
		return false, false
	}
	return e.Net.Watched(ino)
}
