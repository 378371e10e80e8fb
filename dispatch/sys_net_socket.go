// The net family: sockets of every domain and the calls that name
// addresses (FamNet in table.go); internet sockets are served by package
// inet (sys_net_inet.go).

package dispatch

import (
	"encoding/binary"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// Unix sockets (docs/tiers.md, "Unix sockets").
//
// A guest's socket is a host socket, made natively: reads, writes, recv*,
// accept, listen, poll and the socket options never reach kbox. What
// names an address the guest chose reaches kbox, because the host kernel
// would look a path up in the host's filesystem: bind, connect, sendto
// with an address (the filter checks the argument), and every sendmsg
// and sendmmsg (the filter cannot read a msghdr). kbox does them itself,
// on a copy of the guest's socket (pidfd_getfd: the same socket), with
// an address it resolved in the guest's filesystem and memory it copied:
// no guest thread can change what the host kernel looks up.
//
//   - A path bound in the image is a socket node in LKL (mknod S_IFSOCK,
//     with the caller's credentials and umask: EADDRINUSE when the name
//     exists), and the host socket is bound by the binder with the
//     guest's own string (package unixsock): addresses the kernel reports
//     are the guest's. connect and send reach it through its O_PATH fd,
//     found by the node's inode after LKL checked the caller's write
//     permission.
//   - A path in a bind (-b) is the host's: bound in the bind's directory,
//     reached through a confined O_PATH fd. System routes (/proc, /sys,
//     /dev) hold no socket a guest may reach.
//   - Abstract names and autobind are the guest network namespace's:
//     passed to the kernel as given. Without a namespace of its own
//     (unixsock.Set.NetNS) they are refused with EPERM.

// sockRoot says kbox runs as root: it may then attach the guest's own pid
// as the credentials of what it sends (SCM_CREDENTIALS), as the host
// kernel would for the guest. hostUID and hostGID are kbox's real ids,
// the guest's host ids too.
var (
	sockRoot         = os.Geteuid() == 0
	hostUID, hostGID = uint32(os.Getuid()), uint32(os.Getgid())
	kboxPid          = os.Getpid()
)

// sysSocket serves socket(2): AF_UNIX on the host, internet and netlink in LKL.
func sysSocket(e *Engine, r *Request) Result {
	// AF_INET, AF_INET6 and AF_NETLINK go to package inet (without --net,
	// LKL's loopback alone); no other family is served.
	switch fam := int(int32(r.Args[0])); {
	case fam == unix.AF_UNIX:
		return cont
	case e.Net != nil && (fam == unix.AF_INET || fam == unix.AF_INET6 || fam == unix.AF_NETLINK):
		return e.newInet(r, fam, int(int32(r.Args[1])), int(int32(r.Args[2])))
	}
	return errno(unix.EAFNOSUPPORT, Denied) // another family, or no LKL network (Engine.Net)
}

// sysSockNative serves the socket calls on a virtual fd, which is not a socket.
func sysSockNative(e *Engine, r *Request) Result {
	// The filter notifies them for virtual fds only; host fds run them
	// natively.
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	return errno(virtualSockErr(r, r.Args[0]), Emulated)
}

// virtualSockErr is what a socket call on virtual fd fd gives: EBADF when
// it is not open or is an O_PATH fd (Linux's socket calls take no O_PATH
// file), else ENOTSOCK.
func virtualSockErr(r *Request, fd uint64) unix.Errno {
	if e, open := r.P.FDs.Get(int(int32(fd))); !open || isPathFile(e.File) {
		return unix.EBADF
	}
	return unix.ENOTSOCK
}

// sock is kbox's copy of a guest socket.
type sock struct {
	fd  int
	typ int // SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET
}

// sockOf takes a copy of the guest's socket fd (pidfd_getfd: the same
// socket). The caller closes it.
func sockOf(r *Request, fd uint64) (sock, unix.Errno) {
	if isVirtual(r, fd) {
		return sock{fd: -1}, virtualSockErr(r, fd)
	}
	hfd, err := r.P.getfd(int(int32(fd)))
	if err != nil {
		return sock{fd: -1}, unix.EBADF
	}
	typ, err := unix.GetsockoptInt(hfd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		unix.Close(hfd)
		return sock{fd: -1}, unix.ENOTSOCK
	}
	return sock{fd: hfd, typ: typ}, 0
}

// unixDomain reports an AF_UNIX socket: the only family a guest may name
// addresses in (no networking yet; only sockets a guest inherited can be
// of another).
func (s sock) unixDomain() bool {
	dom, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	return err == nil && dom == unix.AF_UNIX
}

func (s sock) nonblocking() bool { return sysabi.Nonblocking(s.fd) }

// Kinds of socket addresses.
const (
	addrOther    = iota // not a unix name (another family, a bad length): the kernel judges
	addrAuto            // AF_UNIX with no name: autobind
	addrAbstract        // a name in the network namespace
	addrPath            // a path
)

// sockaddrUnix is sizeof(struct sockaddr_un).
const sockaddrUnix = 110

type sockAddr struct {
	raw  []byte
	kind int
	path string
}

// readSockaddr reads the address a guest passed (addr, alen), as the
// kernel copies it in (EINVAL above sockaddr_storage, EFAULT), and tells
// what it names.
func readSockaddr(r *Request, addr, alen uint64) (sockAddr, unix.Errno) {
	n := int64(int32(alen))
	if n < 0 || n > sysabi.SockaddrStorage {
		return sockAddr{}, unix.EINVAL
	}
	a := sockAddr{raw: make([]byte, n)}
	if n > 0 {
		if err := r.G.Read(addr, a.raw); err != nil {
			return sockAddr{}, unix.EFAULT
		}
	}
	switch {
	case n < 2 || binary.NativeEndian.Uint16(a.raw) != unix.AF_UNIX || n > sockaddrUnix:
		a.kind = addrOther
	case n == 2:
		a.kind = addrAuto
	case a.raw[2] == 0:
		a.kind = addrAbstract
	default:
		p := a.raw[2:]
		if i := strings.IndexByte(string(p), 0); i >= 0 {
			p = p[:i]
		}
		a.kind, a.path = addrPath, string(p)
	}
	return a, 0
}

// sockaddrPath is a struct sockaddr_un of path p.
func sockaddrPath(p string) []byte {
	b := make([]byte, 2, 2+len(p)+1)
	binary.NativeEndian.PutUint16(b, unix.AF_UNIX)
	return append(append(b, p...), 0)
}

func (e *Engine) netNS() bool { return e.Sockets != nil && e.Sockets.NetNS }

func (e *Engine) binder() *unixsock.Binder {
	if e.Sockets == nil {
		return nil
	}
	return e.Sockets.Binder
}

// peerAddr resolves a destination (connect, sendto, sendmsg of a
// datagram) to the address kbox gives the kernel, and an fd to close
// after the call (-1 if none): a path becomes /proc/self/fd/N of an O_PATH
// fd of the host socket it names, never a path of the guest's.
func (e *Engine) peerAddr(r *Request, a sockAddr) ([]byte, int, unix.Errno) {
	switch a.kind {
	case addrOther:
		return a.raw, -1, 0 // no name is looked up: the kernel fails it or disconnects (AF_UNSPEC)
	case addrAuto:
		return nil, -1, unix.ECONNREFUSED
	case addrAbstract:
		if !e.netNS() {
			return nil, -1, unix.EPERM
		}
		return a.raw, -1, 0
	}
	t, en := e.resolveAt(r, unix.AT_FDCWD, a.path)
	if en != 0 {
		return nil, -1, en
	}
	switch {
	case t.Bind != nil:
		fd, err := t.Bind.Open(t.Rel, unix.O_PATH, 0)
		if err != nil {
			return nil, -1, sysabi.Errno(err)
		}
		return sockaddrPath(guestpath.ProcFd(fd)), fd, 0
	case t.Host:
		return nil, -1, unix.ECONNREFUSED // no socket of a system route is the guest's
	}
	// Linux: the lookup's errors, then write permission on the socket
	// file, then ECONNREFUSED for anything but a bound socket.
	p := t.LKLPath()
	if en := lklAccess(r, p, unix.W_OK, unix.AT_EACCESS); en != 0 {
		return nil, -1, en
	}
	var st lkl.Stat64
	if en := lklStatUncached(p, false, &st); en != 0 {
		return nil, -1, en
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || e.Sockets == nil {
		return nil, -1, unix.ECONNREFUSED
	}
	fd, found := e.Sockets.Open(unixsock.Key{Dev: st.Dev, Ino: st.Ino})
	if !found {
		return nil, -1, unix.ECONNREFUSED
	}
	return sockaddrPath(guestpath.ProcFd(fd)), fd, 0
}

// sysBind serves bind(2): unix names in the guest's filesystem, internet addresses in LKL.
func sysBind(e *Engine, r *Request) Result {
	if in := e.inetOf(r, r.Args[0]); in != nil {
		return e.inetCall(r, in.Bind)
	}
	s, en := sockOf(r, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	defer unix.Close(s.fd)
	if !s.unixDomain() {
		return errno(unix.EAFNOSUPPORT, Denied) // no networking yet
	}
	a, en := readSockaddr(r, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, Host)
	}
	switch a.kind {
	case addrAuto, addrAbstract:
		if !e.netNS() {
			return errno(unix.EPERM, Denied)
		}
		fallthrough
	case addrOther:
		return sockResult(0, rawBind(s.fd, a.raw))
	}
	return e.bindPath(r, s, a.path)
}

// bindPath binds the guest's socket s to path p.
func (e *Engine) bindPath(r *Request, s sock, p string) Result {
	t, en := e.resolveAt(r, unix.AT_FDCWD, p)
	if en != 0 {
		return errno(en, LKL)
	}
	switch {
	case t.Bind != nil:
		if t.Bind.ReadOnly {
			return errno(unix.EROFS, Host)
		}
		dir, base, err := t.Bind.Parent(t.Rel)
		if err == unix.EBUSY {
			return errno(unix.EADDRINUSE, Host) // the bind's own directory
		}
		if err != nil {
			return fail(err, Host)
		}
		defer unix.Close(dir)
		return sockResult(0, e.binder().BindAt(s.fd, dir, base, r.P.umask.Load()))
	case t.Host:
		return errno(unix.EACCES, Denied)
	}
	// The node first, as Linux makes it (EADDRINUSE when the name exists,
	// permissions, umask), then the socket: already bound is EINVAL, and
	// the node goes again.
	lp := t.LKLPath()
	mode := uintptr(unix.S_IFSOCK) | umasked(r, lp, 0o777)
	if _, le := lklPath(lkl.SysMknodat, 1, lp, [6]uintptr{atFdcwd, 0, mode, 0}); le != 0 {
		if le == unix.EEXIST {
			le = unix.EADDRINUSE
		}
		return errno(le, LKL)
	}
	undo := func() { asRoot(func() { lklPath(lkl.SysUnlinkat, 1, lp, [6]uintptr{atFdcwd, 0, 0}) }) }
	if sockNamed(s.fd) {
		undo()
		return errno(unix.EINVAL, Host)
	}
	var st lkl.Stat64
	var sen unix.Errno
	asRoot(func() { sen = lklStatUncached(lp, true, &st) })
	if sen != 0 {
		undo()
		return errno(sen, LKL)
	}
	cd, mk, name, en := e.binderPaths(r, p)
	if en != 0 {
		undo()
		return errno(en, Host)
	}
	fd, err := e.binder().BindPath(s.fd, cd, mk, name)
	if err != nil {
		undo()
		return fail(err, Host)
	}
	e.Sockets.Bound(unixsock.Key{Dev: st.Dev, Ino: st.Ino}, fd)
	return ok(0, Host)
}

// binderPaths says how the binder binds guest path string p: from which
// directory, making which directories (the ones the kernel walks through
// for p, so that ".." in p works), with which string. Chrooted, the string
// is p itself; otherwise the clean path relative to the binder's
// directory.
func (e *Engine) binderPaths(r *Request, p string) (cd, mk, name string, en unix.Errno) {
	b := e.binder()
	if b == nil {
		return "", "", "", unix.EPERM
	}
	if !b.Chroot() {
		c := guestpath.Clean(r.P.Cwd(), p)
		if len(c)-1 > len(unix.RawSockaddrUnix{}.Path) {
			return "", "", "", unix.ENAMETOOLONG
		}
		return "/", path.Dir(c), c[1:], 0
	}
	cd = "/"
	if !strings.HasPrefix(p, "/") {
		cd = r.P.Cwd()
	}
	// The walk: each component of p's directory goes down or up (..);
	// only where it went down and then turned is a new leaf.
	var leaves []string
	cur, down := cd, false
	dir, _ := path.Split(p)
	for _, c := range strings.Split(dir, "/") {
		switch c {
		case "", ".":
		case "..":
			if down {
				leaves = append(leaves, cur)
				down = false
			}
			cur = path.Dir(cur)
		default:
			cur, down = path.Join(cur, c), true
		}
	}
	if down {
		leaves = append(leaves, cur)
	}
	mk = strings.Join(leaves, "\x00")
	if len(cd)+1+len(mk) > 4096 {
		return "", "", "", unix.ENAMETOOLONG
	}
	return cd, mk, p, 0
}

// sysConnect serves connect(2): by kbox to a resolved name, or by LKL.
func sysConnect(e *Engine, r *Request) Result {
	if in := e.inetOf(r, r.Args[0]); in != nil {
		return e.inetCall(r, in.Connect)
	}
	s, en := sockOf(r, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	if !s.unixDomain() {
		unix.Close(s.fd)
		return errno(unix.EAFNOSUPPORT, Denied)
	}
	a, en := readSockaddr(r, r.Args[1], r.Args[2])
	if en != 0 {
		unix.Close(s.fd)
		return errno(en, Host)
	}
	raw, nfd, en := e.peerAddr(r, a)
	if en != 0 {
		unix.Close(s.fd)
		return errno(en, Host)
	}
	e.notePeer(r, s) // peercred.go
	done := func() {
		unix.Close(s.fd)
		if nfd >= 0 {
			unix.Close(nfd)
		}
	}
	if s.typ == unix.SOCK_DGRAM || s.nonblocking() {
		err := rawConnect(s.fd, raw)
		done()
		return sockResult(0, err)
	}
	// A blocking connect waits while the listener's backlog is full:
	// never on the serving thread (sockwait.go).
	return e.connectWait(r, s.fd, raw, done)
}

// lateReplies guards the answers that goroutines give to deferred socket
// calls: none is given once the tier closes its listener.
type lateReplies struct {
	mu     sync.RWMutex
	closed bool
}

// late runs answer unless the tier stopped taking late answers.
func (e *Engine) late(answer func()) {
	e.lateSock.mu.RLock()
	defer e.lateSock.mu.RUnlock()
	if !e.lateSock.closed {
		answer()
	}
}

// StopLateReplies makes goroutines that still wait in a guest's socket
// call (a connect to a full backlog, a send to a full receiver) give no
// answer: the tier calls it before it closes its listener, when no guest
// is left to answer.
func (e *Engine) StopLateReplies() {
	e.lateSock.mu.Lock()
	e.lateSock.closed = true
	e.lateSock.mu.Unlock()
}

func sockResult(v int64, err error) Result {
	if err == nil {
		return ok(v, Host)
	}
	if en, isErrno := err.(unix.Errno); isErrno && en == 0 {
		return ok(v, Host)
	}
	return fail(err, Host)
}

// maxSend bounds what kbox copies for one send: more than any datagram
// (the send buffer's bound); a stream send beyond it is partial.
const maxSend = 8 << 20

// sysSendto serves sendto(2) with a destination, and internet sends with MSG_MORE.
func sysSendto(e *Engine, r *Request) Result {
	// kbox makes the call itself.
	corked := r.Args[4] == 0 && int(int32(r.Args[3]))&unix.MSG_MORE != 0
	if r.Args[4] == 0 && !corked {
		return sysSockNative(e, r) // a virtual fd
	}
	if in := e.inetOf(r, r.Args[0]); in != nil {
		var name []byte
		if !corked {
			var en unix.Errno
			if name, en = readInetAddr(r, r.Args[4], r.Args[5]); en != 0 {
				return errno(en, LKL)
			}
		}
		data := make([]byte, min(r.Args[2], maxSend))
		if err := r.G.Read(r.Args[1], data); err != nil {
			return errno(unix.EFAULT, LKL)
		}
		return e.inetSendto(r, in, data, name, int(int32(r.Args[3])))
	}
	if corked {
		// MSG_MORE without an address: only an internet socket's
		// send is kbox's (inet/more.go).
		return sysSockNative(e, r)
	}
	s, en := sockOf(r, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	j := &sendJob{s: s, flags: int(int32(r.Args[3]))}
	if en := e.sendAddr(r, j, r.Args[4], r.Args[5]); en != 0 {
		j.close()
		return errno(en, Host)
	}
	n := r.Args[2]
	if n > maxSend {
		if s.typ != unix.SOCK_STREAM {
			j.close()
			return errno(unix.EMSGSIZE, Host)
		}
		n = maxSend
	}
	j.data = make([]byte, n)
	if err := r.G.Read(r.Args[1], j.data); err != nil {
		j.close()
		return errno(unix.EFAULT, Host)
	}
	return e.send(r, j, nil)
}

// sendAddr sets j's destination from the guest's address. Only a unix
// datagram socket looks a name up: a stream socket refuses one, a
// seqpacket socket ignores it, and an internet socket's is LKL's, so
// their address goes to the kernel as given.
func (e *Engine) sendAddr(r *Request, j *sendJob, addr, alen uint64) unix.Errno {
	if addr == 0 || alen == 0 {
		return 0
	}
	a, en := readSockaddr(r, addr, alen)
	if en != 0 {
		return en
	}
	if !j.s.unixDomain() || j.s.typ != unix.SOCK_DGRAM {
		// An internet socket's address is LKL's to judge (a stream
		// ignores it: unconnected, EPIPE).
		j.name = a.raw
		return 0
	}
	raw, nfd, en := e.peerAddr(r, a)
	if en != 0 {
		return en
	}
	if nfd >= 0 {
		j.closeFds = append(j.closeFds, nfd)
	}
	j.name = raw
	return 0
}

// sysSendmsg serves sendmsg(2): sent by kbox.
func sysSendmsg(e *Engine, r *Request) Result {
	s, en := sockOf(r, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	j, en := e.readMsg(r, s, r.Args[1], int(int32(r.Args[2])))
	if en != 0 {
		return errno(en, Host)
	}
	if in := e.inetOf(r, r.Args[0]); in != nil {
		data, name, oob, flags := j.data, j.name, j.oob, j.flags
		j.close()
		if !in.Stream() && len(oob) > 0 {
			// A datagram with control data: LKL's sendmsg (inet/cmsg.go).
			return e.inetResult(in.SendDgram(data, name, oob, flags))
		}
		// A stream's control data is not carried.
		return e.inetSendto(r, in, data, name, flags)
	}
	return e.send(r, j, nil)
}

// readMsg copies the guest's struct msghdr at addr, with what it points
// to, into a send job: the destination resolved (sendAddr) and the fds of
// SCM_RIGHTS taken from the guest (kbox's copies are what is sent: the
// same files). On error it closes s.
func (e *Engine) readMsg(r *Request, s sock, addr uint64, flags int) (*sendJob, unix.Errno) {
	j := &sendJob{s: s, flags: flags}
	var mh [sysabi.MsghdrSize]byte
	if err := r.G.Read(addr, mh[:]); err != nil {
		j.close()
		return nil, unix.EFAULT
	}
	le := binary.NativeEndian
	name, namelen := le.Uint64(mh[0:]), uint64(le.Uint32(mh[8:]))
	iov, iovlen := le.Uint64(mh[16:]), le.Uint64(mh[24:])
	ctl, ctllen := le.Uint64(mh[32:]), le.Uint64(mh[40:])
	fail := func(en unix.Errno) (*sendJob, unix.Errno) {
		j.close()
		return nil, en
	}
	if iovlen > sysabi.UioMaxIOV {
		return fail(unix.EMSGSIZE)
	}
	if int32(namelen) < 0 {
		return fail(unix.EINVAL)
	}
	if name != 0 {
		if en := e.sendAddr(r, j, name, namelen); en != 0 {
			return fail(en)
		}
	}
	if iovlen > 0 {
		vec := make([]byte, 16*iovlen)
		if err := r.G.Read(iov, vec); err != nil {
			return fail(unix.EFAULT)
		}
		var total uint64
		for i := uint64(0); i < iovlen; i++ {
			l := le.Uint64(vec[16*i+8:])
			if int64(l) < 0 {
				return fail(unix.EINVAL)
			}
			total += l
		}
		if total > maxSend {
			if s.typ != unix.SOCK_STREAM {
				return fail(unix.EMSGSIZE)
			}
			total = maxSend
		}
		j.data = make([]byte, total)
		off := uint64(0)
		for i := uint64(0); i < iovlen && off < total; i++ {
			b, l := le.Uint64(vec[16*i:]), min(le.Uint64(vec[16*i+8:]), total-off)
			if l == 0 {
				continue
			}
			if err := r.G.Read(b, j.data[off:off+l]); err != nil {
				return fail(unix.EFAULT)
			}
			off += l
		}
	}
	if ctllen > 0 {
		if ctllen > maxControl {
			return fail(unix.ENOBUFS)
		}
		j.oob = make([]byte, ctllen)
		if err := r.G.Read(ctl, j.oob); err != nil {
			return fail(unix.EFAULT)
		}
		if en := guestRights(r, j); en != 0 {
			return fail(en)
		}
	}
	return j, 0
}

// guestRights replaces the guest's fd numbers in SCM_RIGHTS messages with
// kbox's copies of those fds, and checks SCM_CREDENTIALS as the kernel
// would for the guest.
func guestRights(r *Request, j *sendJob) unix.Errno {
	le := binary.NativeEndian
	oob := j.oob
	for o := 0; o+sysabi.CmsgHdr <= len(oob); {
		l := int(le.Uint64(oob[o:]))
		if l < sysabi.CmsgHdr || o+l > len(oob) {
			return unix.EINVAL
		}
		level, typ := int32(le.Uint32(oob[o+8:])), int32(le.Uint32(oob[o+12:]))
		if level == unix.SOL_SOCKET {
			switch typ {
			case unix.SCM_RIGHTS:
				for p := o + sysabi.CmsgHdr; p+4 <= o+l; p += 4 {
					gfd := int32(le.Uint32(oob[p:]))
					if gfd < 0 || isVirtual(r, uint64(uint32(gfd))) {
						return unix.EBADF
					}
					hfd, err := r.P.getfd(int(gfd))
					if err != nil {
						return unix.EBADF
					}
					j.closeFds = append(j.closeFds, hfd)
					le.PutUint32(oob[p:], uint32(hfd))
				}
			case unix.SCM_CREDENTIALS:
				// The kernel checks the pid against the sender's, kbox:
				// the guest naming itself is kbox naming itself.
				if l >= sysabi.CmsgHdr+4 && int(int32(le.Uint32(oob[o+sysabi.CmsgHdr:]))) == r.P.Tgid && !sockRoot {
					le.PutUint32(oob[o+sysabi.CmsgHdr:], uint32(kboxPid))
				} else if l >= sysabi.CmsgHdr+4 && !sockRoot {
					return unix.EPERM
				}
			}
		}
		o += sysabi.CmsgAlign(l)
	}
	return 0
}

// sysSendmmsg serves sendmmsg(2) as sendmsg, one message after another.
func sysSendmmsg(e *Engine, r *Request) Result {
	// When one would block, the first waits (as on Linux); a later one ends
	// the call, which reports how many were sent.
	vlen := min(uint64(uint32(r.Args[2])), sysabi.UioMaxIOV)
	flags := int(int32(r.Args[3]))
	sent := 0
	in := e.inetOf(r, r.Args[0])
	for i := uint64(0); i < vlen; i++ {
		s, en := sockOf(r, r.Args[0])
		if en != 0 {
			return sentOr(sent, en)
		}
		addr := r.Args[1] + i*sysabi.MmsghdrSize
		j, en := e.readMsg(r, s, addr, flags)
		if en != 0 {
			return sentOr(sent, en)
		}
		if sent > 0 {
			j.flags |= unix.MSG_DONTWAIT // only the first may wait
		}
		var res Result
		if in != nil && !in.Stream() && (len(j.name) > 0 || len(j.oob) > 0) {
			// A datagram with a destination or control data: to
			// LKL (inet/cmsg.go).
			data, name, oob, flags := j.data, j.name, j.oob, j.flags
			j.close()
			res = e.inetResult(in.SendDgram(data, name, oob, flags))
		} else {
			if in != nil {
				// Through the pair: no name (TCP ignores one), no
				// ancillary data.
				j.name, j.oob = nil, nil
			}
			res = e.sendOne(r, j, addr)
		}
		if res.Action == Deferred {
			return res
		}
		if res.Errno != 0 {
			if res.Errno == unix.EAGAIN && sent > 0 {
				break
			}
			return sentOr(sent, res.Errno)
		}
		var n [4]byte
		binary.NativeEndian.PutUint32(n[:], uint32(res.Val))
		if err := r.G.Write(addr+sysabi.MsghdrSize, n[:]); err != nil {
			return sentOr(sent, unix.EFAULT)
		}
		sent++
	}
	return ok(int64(sent), Host)
}

// sendOne is one message of sendmmsg through the guest's socket: when it
// waited, the call's answer is 1 and its msg_len written then.
func (e *Engine) sendOne(r *Request, j *sendJob, addr uint64) Result {
	return e.send(r, j, func(p Pending, n int, en unix.Errno) {
		// The first message waited: its length is written now.
		if en != 0 {
			p.ReplyErrno(en)
			return
		}
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], uint32(n))
		if p.Write(addr+sysabi.MsghdrSize, b[:]) != nil {
			p.ReplyErrno(unix.EFAULT)
			return
		}
		p.Reply(1)
	})
}

func sentOr(sent int, en unix.Errno) Result {
	if sent > 0 {
		return ok(int64(sent), Host)
	}
	return errno(en, Host)
}

// sockGoes returns what to do once a path operation that removes the name
// p (when removes) has succeeded: if p was the last name of a socket node
// bound in this run, kbox forgets the node, whose inode numbers LKL may
// give to a new file.
func (e *Engine) sockGoes(p string, removes bool) func() {
	if !removes || !e.Sockets.Any() {
		return func() {}
	}
	var st lkl.Stat64
	if lklStatUncached(p, true, &st) != 0 || st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Nlink > 1 {
		return func() {}
	}
	return func() { e.Sockets.Forget(unixsock.Key{Dev: st.Dev, Ino: st.Ino}) }
}

// sockNodeNew forgets a node kbox bound if the socket file a guest just
// made with mknod got its numbers: no socket is bound to the new file.
func (e *Engine) sockNodeNew(p string) {
	if !e.Sockets.Any() {
		return
	}
	var st lkl.Stat64
	if lklStatUncached(p, true, &st) == 0 {
		e.Sockets.Forget(unixsock.Key{Dev: st.Dev, Ino: st.Ino})
	}
}
