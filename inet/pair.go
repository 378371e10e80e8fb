package inet

import (
	"os"

	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The pair behind an internet socket: the guest's end and kbox's end
// (docs/networking.md, "Sockets and readiness"), made at socket(2) and
// made again at the first connect or listen of a stream socket (renew).

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
func (n *Net) pair(lfd, family, typ int, nonblock bool) (*Sock, int, unix.Errno) {
	gend, kfd, ino, en := hostPair(typ)
	if en != 0 {
		return nil, -1, en
	}
	if nonblock {
		unix.SetNonblock(gend, true)
	}
	s := &Sock{n: n, lfd: lfd, kfd: kfd, file: os.NewFile(uintptr(kfd), "inet"), ino: ino, family: family, typ: typ}
	if en := n.addReady(s); en != 0 {
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
		return -1, -1, 0, sysabi.Errno(err)
	}
	gend, kfd = p[0], p[1]
	var st unix.Stat_t
	if err := unix.Fstat(gend, &st); err != nil {
		unix.Close(gend)
		unix.Close(kfd)
		return -1, -1, 0, sysabi.Errno(err)
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
// fd so far (guest fd r.Args[0]): a stand-in (newInet), an unconnected
// host TCP socket (standin.go) or else a pair's end whose reads gave
// EOF at once. The new end takes the old one's place at the same fd
// with its file flags, close-on-exec, timeouts and SO_OOBINLINE. A copy
// of the stand-in the guest made before (dup, fork) stays the stand-in:
// kbox serves none of its calls. It returns a copy of the guest's end
// (new or not) for the caller to close.
func (s *Sock) renew(r *Req) (int, unix.Errno) {
	old, en := GuestEnd(r.G, r.Args[0])
	if en != 0 {
		return -1, en
	}
	s.mu.Lock()
	fresh, endOpts, sndbufSet := s.fresh, s.endOpts, s.sndbufSet
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
		if v, err := unix.GetsockoptInt(old, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && sndbufSet {
			unix.SetsockoptInt(gend, unix.SOL_SOCKET, unix.SO_SNDBUF, v/2) // the kernel doubles it
		}
	}
	n := s.n
	// A pair's end as the stand-in leaves the reaper first: the guest's
	// end closing when the new one takes its place must not end the
	// socket. (A stand-in socket's close is seen by its watch, which
	// finds the socket renewed: standin.go.)
	if s.kfd >= 0 {
		unix.EpollCtl(n.reaper, unix.EPOLL_CTL_DEL, s.kfd, nil)
	}
	n.mu.Lock()
	delete(n.byIno, s.ino)
	n.byIno[ino] = s
	oldFile := s.file
	s.mu.Lock()
	s.kfd, s.file, s.ino = kfd, os.NewFile(uintptr(kfd), "inet"), ino
	s.mu.Unlock()
	n.mu.Unlock()
	n.watch(s)
	if oldFile != nil {
		oldFile.Close()
	}
	fd := int32(r.Args[0])
	if err := r.G.Replace(gend, int(fd)); err != nil {
		// The guest's fd is still the stand-in: a socket that never
		// connects, or a pair end whose other end is closed now (it
		// reads EOF and its writes fail). kbox's new end reports
		// POLLHUP once gend closes: the reaper ends the socket.
		unix.Close(gend)
		return -1, sysabi.Errno(err)
	}
	return gend, 0
}
