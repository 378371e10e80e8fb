// Package lklready tells kbox's goroutines when LKL fds they hold became
// ready, without a kbox thread waiting inside LKL: one LKL epoll set,
// swept without waiting (docs/networking.md, "Waiting without waiting in
// LKL"). The internet sockets (package inet) and the guest's inotify fds
// (dispatch/sys_file_inotify.go) register their LKL fds here.
package lklready

import (
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
//   - after a burst of frames went to LKL or came from it (usernet's
//     AfterFrames): data, acknowledgements, handshakes, resets from
//     outside;
//   - after each of kbox's own LKL calls on a socket (package inet): segments
//     that arrive while a call holds the socket's lock wait in its
//     backlog and are processed when the call lets go, inside the call
//     (data for the pump that waits while the other pump sends), and a
//     peer on LKL's loopback changes inside the call too;
//   - every sweepTick, for what LKL's timers do (a connect that times out,
//     a keep-alive that fails) and anything else.
//
// A sweep wakes the fd's Waiter, which wakes the goroutine waiting for
// it: for a socket, rdy for reading (the pump to the guest, or a
// listener's watcher), wrdy for writing (the pump from the guest, or a
// connect's wait). Each is a channel of one
// slot, so an event that comes before its waiter waits is kept; a waiter
// always tries its non-blocking call first and waits only on EAGAIN.
//
// Set is one such epoll set; its zero value is ready for use.
type Set struct {
	once sync.Once
	ep   int  // LKL's epoll fd
	ok   bool // ep was made
	mu   sync.Mutex
	byID map[uint64]Waiter
	next uint64
	tick bool // the sweep ticker runs
	bufs sync.Pool

	// Events the sweeps found, and the Readable ones only the ticker's
	// sweeps found, not one after frames or a call (--verbose's
	// counters; a high share would show a missed trigger). A socket
	// turning writable while its pump sends is found by the ticker:
	// nothing waits for it then.
	Swept, ByTick atomic.Uint64

	gen atomic.Uint64 // lkl.Deliveries as the last sweep not the ticker's began

	sweeping atomic.Int32 // sweepIdle, sweepRunning or sweepAgain (Sweep)
}

// sweepTick bounds how late kbox notices what LKL did on its own (its
// timers); everything a frame or a kbox call causes is swept at once.
const sweepTick = 20 * time.Millisecond

// sweepBatch is how many events one epoll_pwait takes.
const sweepBatch = 64

func (r *Set) init() {
	r.once.Do(func() {
		r.byID = map[uint64]Waiter{}
		r.bufs.New = func() any { return new([sweepBatch]unix.EpollEvent) }
		fd, le := lkl.Syscall6(lkl.SysEpollCreate1, unix.EPOLL_CLOEXEC, 0, 0, 0, 0, 0)
		r.ep, r.ok = int(fd), le == 0
	})
}

// Waiter is what a sweep wakes: an LKL socket (package inet), or the
// LKL inotify fd behind a guest's inotify fd (dispatch/sys_file_inotify.go).
type Waiter interface{ Wake(events uint32) }

// Add registers w for the readiness of LKL fd lfd (non-blocking) for
// events, and returns its id (Drop's).
func (r *Set) Add(lfd int, w Waiter, events uint32) (uint64, unix.Errno) {
	r.init()
	if !r.ok {
		return 0, unix.ENOSYS // a liblkl without epoll: kbox's sockets need it
	}
	r.mu.Lock()
	r.next++
	id := r.next
	r.byID[id] = w
	start := !r.tick
	r.tick = true
	r.mu.Unlock()
	ev := &unix.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	_, le := lkl.Syscall6(lkl.SysEpollCtl, uintptr(r.ep), unix.EPOLL_CTL_ADD, uintptr(lfd), lkl.PtrOf(ev), 0, 0)
	runtime.KeepAlive(ev)
	if le != 0 {
		r.Drop(id)
		return 0, le
	}
	if start {
		go r.ticker()
	}
	return id, 0
}

// Drop forgets the waiter registered as id.
func (r *Set) Drop(id uint64) {
	r.mu.Lock()
	delete(r.byID, id)
	r.mu.Unlock()
}

// Sweep wakes the waiters of the LKL sockets that became ready, without
// waiting. Any goroutine may call it. Calls that come while a sweep runs
// make it sweep once more and return at once: what their LKL calls
// made ready is found by that round. One thread sweeps, not one per
// caller: with hundreds of busy sockets each pump's call was followed
// by a sweep of its own, hundreds of threads waited in LKL for its one
// CPU at once, each an LKL task with its kernel stack, and a 64 MiB
// kernel ran out of memory (docs/networking.md, "Many sockets, little
// kernel memory").
func (r *Set) Sweep() {
	for {
		switch r.sweeping.Load() {
		case sweepIdle:
			if !r.sweeping.CompareAndSwap(sweepIdle, sweepRunning) {
				continue
			}
		case sweepRunning:
			if !r.sweeping.CompareAndSwap(sweepRunning, sweepAgain) {
				continue
			}
			return
		default: // sweepAgain: a round is already asked for
			return
		}
		break
	}
	for {
		r.sweep(false)
		if r.sweeping.CompareAndSwap(sweepRunning, sweepIdle) {
			return
		}
		r.sweeping.Store(sweepRunning) // was sweepAgain
	}
}

// The states of Set.sweeping.
const (
	sweepIdle = iota
	sweepRunning
	sweepAgain // running, and asked for another round
)

// sweep is Sweep; for the ticker's, it reports whether it found a socket
// Readable (that no other sweep had found).
func (r *Set) sweep(tick bool) (missed bool) {
	if !r.ok {
		return false
	}
	buf := r.bufs.Get().(*[sweepBatch]unix.EpollEvent)
	defer r.bufs.Put(buf)
	g := lkl.Deliveries()
	if !tick {
		r.gen.Store(g)
	}
	// Frames delivered since the last other sweep began have theirs
	// still to come: what the ticker finds then, it only found first.
	inFlight := tick && g != r.gen.Load()
	for {
		n, le := lkl.Syscall6(lkl.SysEpollPwait, uintptr(r.ep), lkl.PtrOf(buf), sweepBatch, 0, 0, 8)
		runtime.KeepAlive(buf)
		if le == unix.EINTR {
			continue
		}
		if le != 0 || n == 0 {
			return missed
		}
		r.Swept.Add(uint64(n))
		r.mu.Lock()
		for _, ev := range buf[:n] {
			if tick && !inFlight && ev.Events&Readable != 0 {
				r.ByTick.Add(1)
				missed = true
			}
			if s := r.byID[uint64(uint32(ev.Fd))|uint64(uint32(ev.Pad))<<32]; s != nil {
				s.Wake(ev.Events)
			}
		}
		r.mu.Unlock()
		if n < sweepBatch {
			return missed
		}
	}
}

// ticker sweeps while sockets are registered: every sweepTick, and every
// millisecond, backing off again, after a sweep of its own found a
// socket Readable that no other sweep would have (frames still being
// delivered have their own sweep to come: sweep's inFlight). A few in
// thousands of events (docs/networking.md, "What the ticker finds").
func (r *Set) ticker() {
	d := sweepTick
	t := time.NewTimer(d)
	defer t.Stop()
	for range t.C {
		r.mu.Lock()
		if len(r.byID) == 0 {
			r.tick = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if r.sweep(true) {
			d = time.Millisecond
		} else if d = 2 * d; d > sweepTick {
			d = sweepTick
		}
		t.Reset(d)
	}
}

// Readable are the events that wake a socket's reader.
const Readable = unix.EPOLLIN | unix.EPOLLPRI | unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR

// Signal puts a token in a one-slot channel unless one is there.
func Signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Await waits for a token on c, at most d (0: for as long as it takes);
// false when d passed first.
func Await(c chan struct{}, d time.Duration) bool {
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
