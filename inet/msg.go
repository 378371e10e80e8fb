package inet

import (
	"encoding/binary"
	"runtime"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Internet sockets' message calls and queue ioctls (docs/networking.md,
// "Messages, addresses and queues").
//
// With --net the filter notifies recvmsg and recvmmsg on host fds too
// (NetServed), and ioctl's FIONREAD and SIOCOUTQ (NetIoctls): the source
// of a datagram is LKL's (queued by the pump, dgram.go) and lies in a
// msghdr the filter cannot read, and part of a socket's queue is LKL's.
// kbox serves them for an internet datagram socket (recvmsg, recvmmsg) or
// any internet socket (the ioctls) and continues every other call, which
// then runs on the host as before. sendmmsg was always served
// (dispatch/sys_net_socket.go); a message with a destination on an internet datagram
// socket now goes to LKL with that destination.

// recvSpec is one guest struct msghdr of a receive, read when the call
// came: a deferred call outlives its request, and Pending cannot read.
type recvSpec struct {
	hdr        uint64 // where the msghdr is (0: a recvfrom)
	name       uint64
	namelen    int32
	namelenAt  uint64      // where the name's full length goes (0: nowhere)
	iov        [][2]uint64 // base and length of each iovec
	total      uint64
	control    uint64 // msg_control and msg_controllen
	controllen uint64
}

// readRecvSpec reads the guest's msghdr at addr, as the kernel checks it:
// EFAULT, EMSGSIZE beyond UIO_MAXIOV iovecs, EINVAL for a negative name
// or iovec length.
func readRecvSpec(r *Req, addr uint64) (recvSpec, unix.Errno) {
	var mh [sysabi.MsghdrSize]byte
	if err := r.G.Read(addr, mh[:]); err != nil {
		return recvSpec{}, unix.EFAULT
	}
	le := binary.NativeEndian
	sp := recvSpec{hdr: addr, name: le.Uint64(mh[0:]), namelen: int32(le.Uint32(mh[8:])), namelenAt: addr + 8,
		control: le.Uint64(mh[32:]), controllen: le.Uint64(mh[40:])}
	iov, iovlen := le.Uint64(mh[16:]), le.Uint64(mh[24:])
	if iovlen > sysabi.UioMaxIOV {
		return recvSpec{}, unix.EMSGSIZE
	}
	if sp.name != 0 && sp.namelen < 0 {
		return recvSpec{}, unix.EINVAL
	}
	if iovlen > 0 {
		vec := make([]byte, 16*iovlen)
		if err := r.G.Read(iov, vec); err != nil {
			return recvSpec{}, unix.EFAULT
		}
		for i := uint64(0); i < iovlen; i++ {
			b, l := le.Uint64(vec[16*i:]), le.Uint64(vec[16*i+8:])
			if int64(l) < 0 {
				return recvSpec{}, unix.EINVAL
			}
			sp.iov = append(sp.iov, [2]uint64{b, l})
			sp.total += l
		}
	}
	return sp, 0
}

// recvMsgs is one recvmsg (single) or recvmmsg on an internet datagram
// socket, carried out in steps: what is queued is taken at once, a wait
// goes on a goroutine.
type recvMsgs struct {
	s        *Sock
	specs    []recvSpec
	single   bool // recvmsg: the answer is the byte count
	flags    int
	nonblock bool      // MSG_DONTWAIT or an O_NONBLOCK end: never waits
	deadline time.Time // recvmmsg's timeout: ends the call after a datagram
	got      int
}

// recvOne takes one datagram from the guest's end gfd for sp without
// waiting: the data scattered over the iovecs, the source in msg_name
// (what fits; msg_namelen the full length), the control messages kbox
// kept for it (cmsg.go), msg_flags. It returns recvmsg's value. The
// whole datagram is taken into kbox's buffer (its fingerprint finds its
// source); MSG_TRUNC is kbox's, as Linux's UDP does it.
func (m *recvMsgs) recvOne(gfd int, sp *recvSpec, write func(uint64, []byte) error) (int, unix.Errno) {
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	peek := m.flags&unix.MSG_PEEK != 0
	n, src, err := m.s.recvDatagram(gfd, *bp, peek)
	for err == nil && src != nil && src.mark {
		// The socket's error (deliverError), answered once; taken
		// already (SO_ERROR, the error queue): the next datagram.
		if peek {
			m.s.recvDatagram(gfd, *bp, false)
		}
		if en := m.s.takeError(); en != 0 {
			return 0, en
		}
		n, src, err = m.s.recvDatagram(gfd, *bp, peek)
	}
	if err != nil {
		return 0, sysabi.Errno(err)
	}
	var a []byte
	if src != nil {
		a = src.addr
	}
	data := (*bp)[:n]
	if sp.scatter(data, write) != nil {
		return 0, unix.EFAULT
	}
	rflags := 0
	ret := min(n, int(min(sp.total, pumpBuf)))
	if n > ret {
		rflags |= unix.MSG_TRUNC
	}
	if m.flags&unix.MSG_TRUNC != 0 {
		ret = n
	}
	return m.finish(sp, ret, a, srcCtrl(src), rflags, write)
}

// scatter writes data over sp's iovecs, as far as they go.
func (sp *recvSpec) scatter(data []byte, write func(uint64, []byte) error) error {
	for _, v := range sp.iov {
		if len(data) == 0 {
			break
		}
		c := min(uint64(len(data)), v[1])
		if err := write(v[0], data[:c]); err != nil {
			return err
		}
		data = data[c:]
	}
	return nil
}

// srcCtrl is the control messages kbox kept for a datagram (none if
// nothing matched it).
func srcCtrl(src *dgramSrc) []byte {
	if src == nil {
		return nil
	}
	return src.ctrl
}

// finish writes a received message's source a, its control messages and
// its flags into the guest's msghdr (a recvfrom's source only) and
// returns ret, the call's value.
func (m *recvMsgs) finish(sp *recvSpec, ret int, a, ctrl []byte, rflags int, write func(uint64, []byte) error) (int, unix.Errno) {
	le := binary.NativeEndian
	if sp.name != 0 && sp.namelenAt != 0 {
		if sp.namelen > 0 && len(a) > 0 && write(sp.name, a[:min(int(sp.namelen), len(a))]) != nil {
			return 0, unix.EFAULT
		}
		var b [4]byte
		le.PutUint32(b[:], uint32(len(a)))
		if write(sp.namelenAt, b[:]) != nil {
			return 0, unix.EFAULT
		}
	}
	if sp.hdr == 0 {
		return ret, 0 // recvfrom: no msghdr
	}
	clen, trunc := m.controls(sp, ctrl, write)
	if trunc {
		rflags |= unix.MSG_CTRUNC
	}
	var tail [16]byte // msg_controllen, msg_flags
	le.PutUint64(tail[0:], uint64(clen))
	le.PutUint32(tail[8:], uint32(rflags))
	if write(sp.hdr+40, tail[:12]) != nil {
		return 0, unix.EFAULT
	}
	return ret, 0
}

// errOne takes one message from the socket's error queue for sp
// (MSG_ERRQUEUE): LKL's, never waiting. The data is the offending
// datagram's, the source its destination, the control message the
// extended error (IP_RECVERR, IPV6_RECVERR); msg_flags has
// MSG_ERRQUEUE. Reading it clears the socket's error, as Linux's
// sock_dequeue_err_skb does.
func (m *recvMsgs) errOne(sp *recvSpec, write func(uint64, []byte) error) (int, unix.Errno) {
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	buf := (*bp)[:min(sp.total, uint64(len(*bp)))]
	name := make([]byte, sysabi.SockaddrStorage)
	ctl := make([]byte, pumpCtrl)
	fl := m.flags&(unix.MSG_ERRQUEUE|unix.MSG_PEEK|unix.MSG_TRUNC) | unix.MSG_DONTWAIT
	n, alen, clen, rflags, le := lklRecvmsg(m.s.lfd, buf, name, ctl, fl)
	if le != 0 {
		return 0, le
	}
	if m.flags&unix.MSG_PEEK == 0 {
		m.s.takeError()
	}
	data := buf[:min(n, len(buf))]
	if sp.scatter(data, write) != nil {
		return 0, unix.EFAULT
	}
	return m.finish(sp, n, name[:alen], ctl[:clen], rflags&^unix.MSG_CTRUNC, write)
}

// takeError takes the socket's pending error (deliverError), or 0.
func (s *Sock) takeError() unix.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.soError
	s.soError = 0
	return en
}

// controls writes what fits of the control messages ctrl into the
// guest's control buffer: whole messages only, as Linux's put_cmsg (a
// message that does not fit, header and all, is left out and
// MSG_CTRUNC set; one whose header fits but not its data is cut). It
// returns msg_controllen.
func (m *recvMsgs) controls(sp *recvSpec, ctrl []byte, write func(uint64, []byte) error) (int, bool) {
	if len(ctrl) == 0 {
		return 0, false
	}
	if sp.control == 0 || sp.controllen < sysabi.CmsgHdr {
		return 0, true
	}
	room := int(min(sp.controllen, 1<<20))
	out := make([]byte, 0, min(room, len(ctrl)))
	trunc := false
	for c := ctrl; len(c) >= sysabi.CmsgHdr; {
		l := int(binary.NativeEndian.Uint64(c))
		step := min(sysabi.CmsgAlign(l), len(c))
		left := room - len(out)
		if left < sysabi.CmsgHdr {
			trunc = true
			break
		}
		if l > left {
			// The header and what fits of the data, the length the
			// fitting part's (Linux: cmlen = min(room, len)).
			part := append([]byte(nil), c[:left]...)
			binary.NativeEndian.PutUint64(part, uint64(left))
			out = append(out, part...)
			trunc = true
			break
		}
		out = append(out, c[:step]...)
		if len(out) > room {
			out = out[:room] // the last message's padding
		}
		c = c[step:]
	}
	if len(out) > 0 && write(sp.control, out) != nil {
		return 0, trunc
	}
	return len(out), trunc
}

// step takes what is queued. It reports the answer (done), or that the
// call must wait for the guest's end to be readable.
func (m *recvMsgs) step(gfd int, write func(uint64, []byte) error) (v int64, en unix.Errno, done bool) {
	for m.got < len(m.specs) {
		sp := &m.specs[m.got]
		var n int
		var en unix.Errno
		if m.flags&unix.MSG_ERRQUEUE != 0 {
			// The error queue never waits: EAGAIN when empty.
			if n, en = m.errOne(sp, write); en == unix.EAGAIN {
				if m.got > 0 {
					return int64(m.got), 0, true
				}
				return 0, en, true
			}
		} else {
			n, en = m.recvOne(gfd, sp, write)
		}
		switch {
		case en == unix.EAGAIN && m.got > 0 && (m.nonblock || m.flags&unix.MSG_WAITFORONE != 0):
			return int64(m.got), 0, true
		case en == unix.EAGAIN && !m.nonblock:
			return 0, 0, false
		case en != 0 && m.got > 0:
			return int64(m.got), 0, true
		case en != 0:
			return 0, en, true
		}
		if m.single {
			return int64(n), 0, true
		}
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], uint32(n))
		if write(sp.hdr+sysabi.MsghdrSize, b[:]) != nil {
			return int64(m.got), unix.EFAULT, true
		}
		m.got++
		if !m.deadline.IsZero() && !time.Now().Before(m.deadline) {
			break
		}
	}
	return int64(m.got), 0, true
}

// serve answers at once or defers: a blocking receive waits on a
// goroutine, polling the guest's end, interrupted by a signal as the
// blocking accept is (ERESTARTSYS, or EINTR with SO_RCVTIMEO, as Linux's
// sock_intr_errno) and ended by SO_RCVTIMEO (EAGAIN). It owns gfd.
func (s *Sock) serveRecv(r *Req, m *recvMsgs, gfd int) Result {
	v, en, done := m.step(gfd, r.G.Write)
	if done {
		unix.Close(gfd)
		if en != 0 {
			return errno(en, Host)
		}
		return ok(v, Host)
	}
	var limit time.Time
	if tv, err := unix.GetsockoptTimeval(gfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO); err == nil && (tv.Sec != 0 || tv.Usec != 0) {
		limit = time.Now().Add(time.Duration(tv.Nano()))
	}
	p := r.G.Defer(!limit.IsZero(), true)
	go func() {
		defer unix.Close(gfd)
		for {
			if p.Valid() != nil {
				return // the guest went (or the trap tier took it out for a signal)
			}
			wait := sysabi.InterruptTick
			if !limit.IsZero() {
				left := time.Until(limit)
				if left <= 0 {
					s.n.late(func() {
						if m.got > 0 {
							p.Reply(int64(m.got))
						} else {
							p.ReplyErrno(unix.EAGAIN)
						}
					})
					return
				}
				wait = min(wait, left)
			}
			pfd := []unix.PollFd{{Fd: int32(gfd), Events: unix.POLLIN}}
			if n, _ := unix.Poll(pfd, int(wait/time.Millisecond)+1); n < 1 {
				// Nothing came: has a signal ended the wait? (Looked
				// at only then: reading the thread's status costs
				// more than a datagram's whole receive.)
				if p.Valid() == nil && p.Signalled() {
					en := s.n.intrErrno(!limit.IsZero())
					s.n.late(func() {
						if m.got > 0 {
							p.Reply(int64(m.got)) // recvmmsg: what came before
						} else {
							p.ReplyErrno(en)
						}
					})
					return
				}
				continue
			}
			if p.Valid() != nil {
				return
			}
			finished := false
			s.n.late(func() {
				v, en, done := m.step(gfd, p.Write)
				if !done {
					return // another reader took it
				}
				finished = true
				if en != 0 {
					p.ReplyErrno(en)
				} else {
					p.Reply(v)
				}
			})
			if finished {
				return
			}
		}
	}()
	return deferred(Host)
}

// RecvfromDgram serves recvfrom(2) with a source address on an
// internet datagram socket, as a recvmsg of one iovec: the datagram's
// source is the one kbox queued for it (dgram.go); and recvfrom with
// MSG_ERRQUEUE on any internet socket (LKL's error queue).
func (s *Sock) RecvfromDgram(r *Req) Result {
	flags := int(int32(r.Args[3]))
	sp := recvSpec{iov: [][2]uint64{{r.Args[1], r.Args[2]}}, total: r.Args[2]}
	if int64(r.Args[2]) < 0 {
		return errno(unix.EFAULT, Host)
	}
	if addr, lenArg := r.Args[4], r.Args[5]; addr != 0 && lenArg != 0 {
		var lb [4]byte
		if err := r.G.Read(lenArg, lb[:]); err != nil {
			return errno(unix.EFAULT, Host)
		}
		sp.name, sp.namelen, sp.namelenAt = addr, int32(binary.NativeEndian.Uint32(lb[:])), lenArg
		if sp.namelen < 0 {
			return errno(unix.EINVAL, Host)
		}
	}
	gfd, en := GuestEnd(r.G, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	m := &recvMsgs{s: s, specs: []recvSpec{sp}, single: true, flags: flags,
		nonblock: flags&unix.MSG_DONTWAIT != 0 || sysabi.Nonblocking(gfd)}
	return s.serveRecv(r, m, gfd)
}

// Drain waits, up to d, until every socket whose guest end is closed
// everywhere has been ended: what the guest wrote last given to LKL, and
// LKL's socket closed (which sends that data and the FIN). kbox calls it
// when the guest has exited, before it stops the network: the guest's
// last write and close must not race the network's end (a published
// connection lost the guest's last line when the in-process guest exited
// at once after its close). Sockets the guest still holds are not waited
// for.
func (n *Net) Drain(d time.Duration) {
	deadline := time.Now().Add(d)
	for pause := 50 * time.Microsecond; time.Now().Before(deadline); pause = min(2*pause, 5*time.Millisecond) {
		if n.ending.Load() == 0 && !n.anyGone() {
			return
		}
		// Short pauses first: ending a socket takes well under a
		// millisecond, and the run's exit waits on this.
		time.Sleep(pause)
	}
}

// anyGone reports whether a socket's guest end is closed everywhere but
// the reaper has not taken it yet.
func (n *Net) anyGone() bool {
	if n.closesPending() {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.byIno {
		if s.kfd >= 0 && sysabi.GuestGone(s.kfd) {
			return true
		}
	}
	return false
}

// lklQueue is LKL's SIOCINQ or SIOCOUTQ of its socket fd (a call that
// does not wait: netCall).
func lklQueue(fd int, cmd uint32) (int, unix.Errno) {
	b := make([]byte, 4)
	_, le := netCall(lkl.SysIoctl, uintptr(fd), uintptr(cmd), lkl.Ptr(b), 0, 0, 0)
	runtime.KeepAlive(b)
	if le != 0 {
		return 0, le
	}
	return int(int32(binary.NativeEndian.Uint32(b))), 0
}

// Queued counts s's queue as Linux would for the guest.
//
// FIONREAD: a stream's bytes in the guest's end plus those LKL holds
// (the pump had no room in the pair yet; up to 64 KiB the pump holds
// between the two are not counted); a datagram socket's first datagram,
// in the guest's end or else in LKL (UDP answers the first datagram's
// size); a listener's is LKL's answer (EINVAL), its token byte left out.
//
// SIOCOUTQ of a stream: what the guest wrote that LKL's peer has not
// acknowledged, i.e. what is in kbox's end, plus what the pump read from
// it, less what LKL's TCP_INFO says was acknowledged (tcpi_bytes_acked,
// less the SYN's one). Not LKL's SIOCOUTQ plus the pump's buffer: a
// send in progress may have given LKL part of that buffer already. LKL's
// alone while a connect is in progress (kbox's end holds filler then). A
// datagram socket's: kbox's end plus LKL's.
func (s *Sock) Queued(r *Req, cmd uint32) (int, unix.Errno) {
	s.mu.Lock()
	listening, connecting, kfd := s.listening, s.connecting, s.kfd
	s.mu.Unlock()
	lq, le := lklQueue(s.lfd, cmd)
	if le != 0 || listening {
		return lq, le
	}
	if cmd == unix.SIOCOUTQ {
		if connecting || kfd < 0 {
			return lq, 0 // kbox's end holds filler, or there is none yet
		}
		kq, err := unix.IoctlGetInt(kfd, unix.SIOCINQ)
		if err != nil {
			return 0, sysabi.Errno(err)
		}
		if s.typ != unix.SOCK_STREAM {
			return kq + lq, 0
		}
		acked, ok := lklBytesAcked(s.lfd)
		if !ok {
			return kq + lq, 0
		}
		// The SYN counts as one byte acknowledged.
		return kq + int(max(s.fromGuestBytes.Load()-max(acked-1, 0), 0)), 0
	}
	gfd, en := GuestEnd(r.G, r.Args[0])
	if en != 0 {
		return 0, en
	}
	defer unix.Close(gfd)
	if s.typ != unix.SOCK_STREAM {
		n, _, _, _, err := unix.Recvmsg(gfd, nil, nil, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		if err == nil {
			return n, 0
		}
		return lq, 0
	}
	gq, err := unix.IoctlGetInt(gfd, unix.SIOCINQ)
	if err != nil {
		return 0, sysabi.Errno(err)
	}
	return gq + lq, 0
}

// tcpiBytesAcked is the offset of tcpi_bytes_acked in struct tcp_info.
const tcpiBytesAcked = 120

// lklBytesAcked is LKL's tcpi_bytes_acked of its TCP socket fd: the bytes
// its peer acknowledged.
func lklBytesAcked(fd int) (int64, bool) {
	b := make([]byte, 256)
	l := make([]byte, 4)
	binary.NativeEndian.PutUint32(l, uint32(len(b)))
	_, le := lkl.Syscall6(lkl.SysGetsockopt, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_INFO, lkl.Ptr(b), lkl.Ptr(l), 0)
	runtime.KeepAlive(b)
	runtime.KeepAlive(l)
	if le != 0 || binary.NativeEndian.Uint32(l) < tcpiBytesAcked+8 {
		return 0, false
	}
	return int64(binary.NativeEndian.Uint64(b[tcpiBytesAcked:])), true
}

// Recvmsg serves recvmsg(2) on s (a datagram socket, or any internet
// socket's error queue): the datagram's source is the one kbox queued for
// it, the control messages LKL's.
func (s *Sock) Recvmsg(r *Req) Result {
	sp, en := readRecvSpec(r, r.Args[1])
	if en != 0 {
		return errno(en, Host)
	}
	gfd, en := GuestEnd(r.G, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	flags := int(int32(r.Args[2]))
	m := &recvMsgs{s: s, specs: []recvSpec{sp}, single: true, flags: flags,
		nonblock: flags&unix.MSG_DONTWAIT != 0 || sysabi.Nonblocking(gfd)}
	return s.serveRecv(r, m, gfd)
}

// Recvmmsg serves recvmmsg(2) on datagram socket s: as recvmsg, one
// datagram after another (each with its source); a blocking call waits
// for each unless MSG_WAITFORONE, and the timeout is looked at after
// each datagram, as Linux does.
func (s *Sock) Recvmmsg(r *Req) Result {
	flags := int(int32(r.Args[3]))
	vlen := min(uint64(uint32(r.Args[2])), sysabi.UioMaxIOV)
	m := &recvMsgs{s: s, flags: flags}
	if r.Args[4] != 0 {
		var ts [16]byte
		if err := r.G.Read(r.Args[4], ts[:]); err != nil {
			return errno(unix.EFAULT, Host)
		}
		sec, nsec := int64(binary.NativeEndian.Uint64(ts[0:])), int64(binary.NativeEndian.Uint64(ts[8:]))
		if sec < 0 || nsec < 0 || nsec >= 1e9 {
			return errno(unix.EINVAL, Host)
		}
		m.deadline = time.Now().Add(time.Duration(sec)*time.Second + time.Duration(nsec))
	}
	for i := uint64(0); i < vlen; i++ {
		sp, en := readRecvSpec(r, r.Args[1]+i*sysabi.MmsghdrSize)
		if en != 0 {
			return errno(en, Host)
		}
		m.specs = append(m.specs, sp)
	}
	if len(m.specs) == 0 {
		return ok(0, Host)
	}
	gfd, en := GuestEnd(r.G, r.Args[0])
	if en != 0 {
		return errno(en, Host)
	}
	m.nonblock = flags&unix.MSG_DONTWAIT != 0 || sysabi.Nonblocking(gfd)
	return s.serveRecv(r, m, gfd)
}
