package dispatch

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Readiness of LKL's sockets without a thread waiting in LKL
// (docs/networking.md, "Waiting without waiting in LKL").
//
// A kbox thread that waits inside LKL (a blocking recv, a ppoll) is an LKL
// task, and LKL hands its one CPU between tasks by waking and parking host
// threads: the waiting task's, LKL's idle task's and its idle host task's,
// several context switches each time a wait begins and ends, and the Go
// thread stays in a cgo call meanwhile (Go's monitor then takes its P back
// and starts another thread). So every LKL socket kbox holds is
// non-blocking, and its readiness comes from one LKL epoll set in which
// each is registered edge-triggered. kbox sweeps the set without waiting
// (epoll_pwait with a zero timeout, on whatever thread asks) whenever
// something may have made a socket ready:
//
//   - after frames were delivered to LKL (usernet's writer calls Sweep
//     once its queue is empty): data, acknowledgements, handshakes,
//     resets from outside;
//   - after kbox's own calls on a socket whose peer is the guest itself
//     (LKL's loopback: the peer's readiness changes inside the call);
//   - every sweepTick, for what LKL's timers do (a connect that times out,
//     a keep-alive that fails) and anything else.
//
// A sweep wakes the goroutine waiting for that socket: rdy for reading
// (the pump to the guest, or a listener's watcher), wrdy for writing (the
// pump from the guest, or a connect's wait). Each is a channel of one
// slot, so an event that comes before its waiter waits is kept; a waiter
// always tries its non-blocking call first and waits only on EAGAIN.
type lklReady struct {
	once sync.Once
	ep   int  // LKL's epoll fd
	ok   bool // ep was made
	mu   sync.Mutex
	byID map[uint64]*inetSock
	next uint64
	tick bool // the sweep ticker runs
	bufs sync.Pool

	// Events found by the ticker's sweeps, not by one after a delivery or
	// a call: how often the ticker was the one that woke a waiter
	// (--verbose's counters; a high share would show a missed trigger).
	Swept, ByTick atomic.Uint64
}

// sweepTick bounds how late kbox notices what LKL did on its own (its
// timers); everything a frame or a kbox call causes is swept at once.
const sweepTick = 20 * time.Millisecond

// sweepBatch is how many events one epoll_pwait takes.
const sweepBatch = 64

// readyEvents are the events each LKL socket is registered for.
const readyEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET

func (r *lklReady) init() {
	r.once.Do(func() {
		r.byID = map[uint64]*inetSock{}
		r.bufs.New = func() any { return new([sweepBatch]unix.EpollEvent) }
		fd, le := lkl.Syscall6(lkl.SysEpollCreate1, unix.EPOLL_CLOEXEC, 0, 0, 0, 0, 0)
		r.ep, r.ok = int(fd), le == 0
	})
}

// add registers s (its LKL socket non-blocking).
func (r *lklReady) add(s *inetSock) unix.Errno {
	r.init()
	if !r.ok {
		return unix.ENOSYS // a liblkl without epoll: kbox's sockets need it
	}
	s.rdy = make(chan struct{}, 1)
	s.wrdy = make(chan struct{}, 1)
	r.mu.Lock()
	r.next++
	s.id = r.next
	r.byID[s.id] = s
	start := !r.tick
	r.tick = true
	r.mu.Unlock()
	ev := &unix.EpollEvent{Events: readyEvents, Fd: int32(uint32(s.id)), Pad: int32(uint32(s.id >> 32))}
	_, le := lkl.Syscall6(lkl.SysEpollCtl, uintptr(r.ep), unix.EPOLL_CTL_ADD, uintptr(s.lfd), lkl.PtrOf(ev), 0, 0)
	runtime.KeepAlive(ev)
	if le != 0 {
		r.drop(s)
		return le
	}
	if start {
		go r.ticker()
	}
	return 0
}

// drop forgets s (its LKL socket is about to be closed, which takes it
// out of the set).
func (r *lklReady) drop(s *inetSock) {
	r.mu.Lock()
	delete(r.byID, s.id)
	r.mu.Unlock()
}

// Sweep wakes the waiters of the LKL sockets that became ready, without
// waiting. Any goroutine may call it.
func (r *lklReady) Sweep() { r.sweep(false) }

func (r *lklReady) sweep(tick bool) {
	if !r.ok {
		return
	}
	buf := r.bufs.Get().(*[sweepBatch]unix.EpollEvent)
	defer r.bufs.Put(buf)
	for {
		n, le := lkl.Syscall6(lkl.SysEpollPwait, uintptr(r.ep), lkl.PtrOf(buf), sweepBatch, 0, 0, 8)
		runtime.KeepAlive(buf)
		if le == unix.EINTR {
			continue
		}
		if le != 0 || n == 0 {
			return
		}
		r.Swept.Add(uint64(n))
		if tick {
			r.ByTick.Add(uint64(n))
		}
		r.mu.Lock()
		for _, ev := range buf[:n] {
			if s := r.byID[uint64(uint32(ev.Fd))|uint64(uint32(ev.Pad))<<32]; s != nil {
				s.wake(ev.Events)
			}
		}
		r.mu.Unlock()
		if n < sweepBatch {
			return
		}
	}
}

// ticker sweeps every sweepTick while sockets are registered.
func (r *lklReady) ticker() {
	t := time.NewTicker(sweepTick)
	defer t.Stop()
	for range t.C {
		r.mu.Lock()
		if len(r.byID) == 0 {
			r.tick = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.sweep(true)
	}
}

// wake tells s's waiters of events.
func (s *inetSock) wake(events uint32) {
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		signal(s.rdy)
	}
	if events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		signal(s.wrdy)
	}
}

// signal puts a token in a one-slot channel unless one is there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// settled is called after kbox's own LKL call on s: when s's peer is the
// guest's own (LKL's loopback), that call may have made the peer ready.
func (s *inetSock) settled() {
	if s.local.Load() {
		s.n.ready.Sweep()
	}
}

// markLocal records whether the peer at sockaddr a is the guest itself:
// a loopback address or one of the guest's own (Inet.Own).
func (s *inetSock) markLocal(a []byte) {
	addr, ok := sockaddrIP(a)
	if !ok {
		return
	}
	local := addr.IsLoopback() || addr.IsUnspecified()
	for _, o := range s.n.Own {
		local = local || addr == o
	}
	if local {
		s.local.Store(true)
	}
}

// sockaddrIP is the address of an internet sockaddr, unmapped.
func sockaddrIP(b []byte) (netip.Addr, bool) {
	if len(b) < 2 {
		return netip.Addr{}, false
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrFrom4([4]byte(b[4:8])), true
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrFrom16([16]byte(b[8:24])).Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// await waits for a token on c, at most d (0: for as long as it takes);
// false when d passed first.
func await(c chan struct{}, d time.Duration) bool {
	if d <= 0 {
		<-c
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
		return false
	}
}
