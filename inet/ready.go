package inet

import (
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/lklready"
	"golang.org/x/sys/unix"
)

// Readiness of LKL's sockets without a thread waiting in LKL: package
// lklready (docs/networking.md, "Waiting without waiting in LKL").

// netSlots bounds the pumps' LKL calls in progress at once. They never
// wait in LKL but for its one CPU, so more at once gain nothing, and
// each costs a host thread that becomes an LKL task (a kernel stack in
// the guest's kernel memory) for good.
var netSlots = make(chan struct{}, 4)

// netCall is lkl.Syscall6 for a call that does not wait (a non-blocking
// socket's send, receive or queue ioctl), in one of netSlots.
func netCall(nr, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, unix.Errno) {
	netSlots <- struct{}{}
	r, le := lkl.Syscall6(nr, a1, a2, a3, a4, a5, a6)
	<-netSlots
	return r, le
}

// readyEvents are the events each LKL socket is registered for.
const readyEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLPRI | unix.EPOLLET

// addReady registers s (its LKL socket non-blocking) in n's readiness
// set.
func (n *Net) addReady(s *Sock) unix.Errno {
	s.rdy = make(chan struct{}, 1)
	s.wrdy = make(chan struct{}, 1)
	id, en := n.ready.Add(s.lfd, s, readyEvents)
	s.id = id
	return en
}

// dropReady forgets s (its LKL socket is about to be closed, which takes
// it out of the set).
func (n *Net) dropReady(s *Sock) { n.ready.Drop(s.id) }

// Wake tells s's waiters of events; lklready's sweeps call it
// (lklready.Waiter).
func (s *Sock) Wake(events uint32) {
	if events&unix.EPOLLPRI != 0 {
		s.urgentGen.Add(1) // TCP urgent data (passUrgent)
	}
	if events&lklready.Readable != 0 {
		lklready.Signal(s.rdy)
	}
	if events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		lklready.Signal(s.wrdy)
	}
}

// settled follows kbox's own LKL call on s: the call may have made s or
// another socket ready (lklready).
func (s *Sock) settled() { s.n.ready.Sweep() }
