package inet

import (
	"runtime"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Corked sends (docs/networking.md, "MSG_MORE").
//
// The guest's plain sends run natively on the pair, which has no
// MSG_MORE: the pump would pass the data on at once. The filter therefore
// notifies a send with MSG_MORE, and kbox gives its data to LKL's socket
// with MSG_MORE itself, once everything the guest sent before has reached
// LKL: the pump holds outMu from its read of a chunk until LKL took it,
// and kbox's end must be empty. The guest's next send without MSG_MORE
// goes through the pair as usual; LKL's send of it ends the cork.

// moreTries and moreWait bound how long a corked send waits for the pump
// to pass on what came before it (a chunk of the pump's own in LKL's full
// send buffer would hold it longer): through the pair, the send would not
// be corked, and a datagram would not join the next.
const (
	moreTries = 20
	moreWait  = time.Millisecond
)

// SendMore sends data, which the guest sent with flags holding MSG_MORE
// and no address, to LKL's socket. It reports false when it sent nothing
// (the pump stays busy, LKL's send buffer is full, or the socket is not
// connected): the caller then sends the data through the pair, uncorked.
// Otherwise it returns what LKL took and LKL's error; a stream's rest, if
// LKL took part of it, goes through the pair.
func (s *Sock) SendMore(data []byte, flags int) (int, unix.Errno, bool) {
	for i := 0; i < moreTries; i++ {
		if i > 0 {
			time.Sleep(moreWait)
		}
		n, le, res := s.sendMore(data, flags)
		switch res {
		case moreSent:
			return n, le, true
		case moreNot:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// What one try of SendMore did.
const (
	moreSent = iota
	moreBusy // the pump holds data of the guest's, or kbox's end does
	moreNot  // the socket cannot take it now
)

// sendMore is one try of SendMore.
func (s *Sock) sendMore(data []byte, flags int) (int, unix.Errno, int) {
	s.mu.Lock()
	ready := s.pumping && !s.closed && s.kfd >= 0 && (s.typ != unix.SOCK_STREAM || s.connected)
	s.mu.Unlock()
	if !ready {
		return 0, 0, moreNot
	}
	stream := s.typ == unix.SOCK_STREAM
	if stream && s.outWaiting.Load() {
		return 0, 0, moreNot // LKL's send buffer is full: the pump waits for room
	}
	if !s.outMu.TryLock() {
		return 0, 0, moreBusy
	}
	defer s.outMu.Unlock()
	pfd := []unix.PollFd{{Fd: int32(s.kfd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 0); err != nil || n != 0 {
		// The guest's earlier data is still in the pair. A stream
		// adds to it (what the pump sends is not held back then);
		// a datagram waits, or it would not join the next.
		if stream {
			return 0, 0, moreNot
		}
		return 0, 0, moreBusy
	}
	fl := flags&(unix.MSG_MORE|unix.MSG_OOB|unix.MSG_EOR) | unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT
	n, le := netCall(lkl.SysSendto, uintptr(s.lfd), ptrOr0(data), uintptr(len(data)), uintptr(fl), 0, 0)
	runtime.KeepAlive(data)
	s.settled()
	if le == 0 {
		s.fromGuestBytes.Add(int64(n))
	}
	if le == 0 || !stream && le != unix.EAGAIN {
		return int(n), le, moreSent
	}
	return 0, 0, moreNot // LKL's buffer is full, or the connection failed: the pair's way
}
