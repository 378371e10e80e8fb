package inet

import (
	"hash/maphash"
	"time"

	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// A datagram socket's sources (docs/networking.md, "Datagram sources").
//
// The pump queues, for each datagram it writes into the pair, the
// datagram's source and a fingerprint of it (its length and a 64-bit
// hash). The guest's plain reads (read, readv, recv) run natively and
// take datagrams kbox is never told of, so when kbox serves a receive it
// finds the entry of the datagram it took rather than popping the
// queue's head: the entries before it belong to datagrams read natively
// and are dropped. Where it is, is known exactly from the bytes left in
// the guest's end after the receive (SIOCINQ of a SOCK_SEQPACKET counts
// all its datagrams): the datagrams still there are the queue's last
// entries, and the one taken is just before them. The fingerprint then
// confirms it, and finds it when another process's read raced the count.

// maxSources bounds a socket's queue of sources: a guest that only ever
// reads natively would otherwise grow it forever. The pair cannot hold
// nearly that many datagrams (its send buffer counts each one's truesize).
const maxSources = 4096

// dgramSeed keys the datagrams' fingerprints.
var dgramSeed = maphash.MakeSeed()

// dgramSrc is what kbox knows of one datagram it wrote into the pair.
type dgramSrc struct {
	addr []byte // its source, a sockaddr
	n    int    // its length
	sum  uint64 // its hash
	ctrl []byte // the control messages the guest asked for (cmsg.go)
	// mark: no datagram but the socket's error (Sock.soError), as
	// an empty record in the pair (deliverError).
	mark bool
}

func (d *dgramSrc) is(n int, sum uint64) bool { return d.n == n && d.sum == sum }

// deliver writes datagram d from addr into kbox's end, queuing its
// source first. The queue's lock is held while the datagram goes in, so a
// receive sees the pair and the queue agree; when the pair is full the
// lock is let go while waiting for room (the entry stays, marked
// unwritten). It reports false when the guest's end is gone.
func (s *Sock) deliver(d, addr, ctrl []byte) bool {
	return s.put(d, dgramSrc{addr: append([]byte(nil), addr...), ctrl: ctrl})
}

// deliverError tells the guest of the error LKL's receive returned on a
// datagram socket (an ICMP error on a connected socket, or any with
// IP_RECVERR: Linux's sk_err, which that receive cleared in LKL). The
// error is kept as s.soError, and an empty record in the pair makes the
// guest's end readable, as the error makes Linux's socket: the receive
// kbox serves finds the record's mark and answers the error once
// (recvOne); SO_ERROR takes it too. A plain read, which runs natively,
// gets an empty datagram.
func (s *Sock) deliverError(le unix.Errno) bool {
	s.mu.Lock()
	s.soError = le
	s.mu.Unlock()
	return s.put(nil, dgramSrc{mark: true})
}

// put writes datagram d into kbox's end with e, its entry.
func (s *Sock) put(d []byte, e dgramSrc) bool {
	e.n, e.sum = len(d), maphash.Bytes(dgramSeed, d)
	s.qmu.Lock()
	if len(s.srcs) >= 64 {
		// Nothing of kbox's left in the guest's end: every entry's
		// datagram was read (natively, since kbox did not take them).
		if q, err := unix.IoctlGetInt(s.kfd, unix.SIOCOUTQ); err == nil && q == 0 {
			s.srcs = s.srcs[:0]
		} else if len(s.srcs) >= maxSources {
			s.srcs = append(s.srcs[:0], s.srcs[len(s.srcs)-maxSources/2:]...)
		}
	}
	s.srcs = append(s.srcs, e)
	s.unwritten = 1
	for {
		err := unix.Sendto(s.kfd, d, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, nil)
		if err == nil {
			s.unwritten = 0
			s.qmu.Unlock()
			return true
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EAGAIN {
			s.srcs = s.srcs[:len(s.srcs)-1]
			s.unwritten = 0
			s.qmu.Unlock()
			return false
		}
		s.qmu.Unlock()
		pfd := []unix.PollFd{{Fd: int32(s.kfd), Events: unix.POLLOUT}}
		unix.Poll(pfd, int(sysabi.InterruptTick/time.Millisecond))
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return false
		}
		s.qmu.Lock()
	}
}

// recvDatagram takes the guest's end gfd's first datagram into buf
// (pumpBuf long: the whole datagram) without waiting, or only peeks at
// it, and returns its length and what kbox queued for it (nil if
// nothing matched).
func (s *Sock) recvDatagram(gfd int, buf []byte, peek bool) (int, *dgramSrc, error) {
	fl := unix.MSG_DONTWAIT
	if peek {
		fl |= unix.MSG_PEEK
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	n, _, _, _, err := unix.Recvmsg(gfd, buf, nil, fl)
	if err != nil {
		return 0, nil, err
	}
	n = min(n, len(buf))
	inq, err := unix.IoctlGetInt(gfd, unix.SIOCINQ)
	if err != nil {
		inq = -1
	}
	i := s.locate(n, maphash.Bytes(dgramSeed, buf[:n]), inq, peek)
	if i < 0 {
		return n, nil, nil
	}
	d := s.srcs[i]
	if !peek {
		s.srcs = s.srcs[i+1:]
	}
	return n, &d, nil
}

// locate returns the index in the queue of the datagram of length n and
// hash sum just received (peek: peeked at), inq bytes being left in the
// guest's end (-1: unknown), or -1.
//
// The datagrams left are the last written entries whose lengths add up
// to inq; the one received is just before them (a peeked one is the
// first of them). Empty datagrams make that a range; the oldest entry
// that matches in it is taken (the natural order, when nothing was read
// natively). When another process read concurrently, fewer bytes are
// left than the count assumes: the datagram is then further back, and
// the fingerprint finds it.
func (s *Sock) locate(n int, sum uint64, inq int, peek bool) int {
	q := s.srcs
	w := len(q) - s.unwritten
	if inq >= 0 {
		a, b, acc := -1, -1, 0
		for h := w; h >= 0; h-- {
			if acc == inq {
				if b < 0 {
					b = h
				}
				a = h
			} else if acc > inq {
				break
			}
			if h > 0 {
				acc += q[h-1].n
			}
		}
		if a >= 0 {
			lo, hi := a-1, b-1
			if peek {
				lo, hi = a, b
			}
			for i := max(lo, 0); i <= min(hi, w-1); i++ {
				if q[i].is(n, sum) {
					return i
				}
			}
			for i := min(lo-1, w-1); i >= 0; i-- {
				if q[i].is(n, sum) {
					return i
				}
			}
		}
	}
	for i := 0; i < w; i++ {
		if q[i].is(n, sum) {
			return i
		}
	}
	return -1
}

// A UDP datagram is at most 65507 bytes over IPv4 and 65527 over IPv6
// (65535 less the headers): larger, Linux's send fails with EMSGSIZE.
// The guest's plain send and write run natively on the pair, whose
// AF_UNIX refuses (EMSGSIZE) a record longer than its send buffer less
// 32 bytes, so the guest's end gets the send buffer that puts that bound
// at the protocol's (udpSendBuf). The kernel doubles what is asked, so
// the bound is even: one byte over the protocol's limit (65508, 65528)
// still enters the pair, and LKL's EMSGSIZE drops it at the pump.
const (
	udpMax4 = 65535 - 20 - 8
	udpMax6 = 65535 - 8
)

// udpSendBuf bounds the records of guest end gend of a UDP socket of
// family to the protocol's datagram size (rounded up to even).
func udpSendBuf(gend, family int) {
	max := udpMax4
	if family == unix.AF_INET6 {
		max = udpMax6
	}
	unix.SetsockoptInt(gend, unix.SOL_SOCKET, unix.SO_SNDBUF, (max+32+1)/2)
}

// isUDP says a datagram socket of family and proto is UDP's.
func isUDP(family, proto int) bool {
	return (family == unix.AF_INET || family == unix.AF_INET6) &&
		(proto == 0 || proto == unix.IPPROTO_UDP || proto == unix.IPPROTO_UDPLITE)
}
