//go:build linux && amd64 && cgo

package trap

import (
	"errors"
	"sync"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// guest is dispatch.Guest for a syscall of one guest thread: the guest's
// memory is kbox's own (read and written directly, fault-safe: unsafe.go),
// its fds live in kbox's fd table below the guest's limit (fds.go).
type guest struct {
	t *thread
	// deferred: the handler called Defer; the thread waits on it.
	deferred *pending
}

var _ dispatch.Guest = (*guest)(nil)

func (g *guest) Pid() int { return g.t.tid }

func (g *guest) Read(addr uint64, b []byte) error { return readMem(addr, b) }

func (g *guest) ReadSome(addr uint64, b []byte) (int, error) { return readSome(addr, b) }

func (g *guest) Write(addr uint64, b []byte) error { return writeMem(&tr.mem, addr, b) }

// WriteForce is Write: the seccomp tier needs it for exec's path strings,
// which this tier does not rewrite.
func (g *guest) WriteForce(addr uint64, b []byte) error { return g.Write(addr, b) }

// Raise makes sig pending for the calling thread (dispatch.Raiser): a
// host signal sent to it while kbox serves its syscall would reach
// kbox's handler, not the guest's.
func (g *guest) Raise(sig int) { tr.send(g.t, sig, makeInfo(sig, siUser, tr.pid, 0)) }

// Valid: the calling thread waits in kbox until it is answered.
func (g *guest) Valid() error { return nil }

func (g *guest) AddFD(hostfd, target int, cloexec bool) (int, error) {
	if target < 0 {
		return tr.fds.place(hostfd, 0, cloexec)
	}
	if err := tr.fds.install(hostfd, target, cloexec); err != nil {
		return -1, err
	}
	return target, nil
}

func (g *guest) AddFDReply(hostfd int, cloexec bool) (int, error) {
	fd, err := tr.fds.place(hostfd, 0, cloexec)
	if err == nil {
		g.t.ret(int64(fd))
	}
	return fd, err
}

// LendFD installs hostfd as AddFDReply does and keeps it for back
// (dispatch.Lender, lend.go).
func (g *guest) LendFD(hostfd int, cloexec bool, back dispatch.Returner) (int, error) {
	fd, err := tr.fds.lend(hostfd, cloexec, back)
	if err == nil {
		g.t.ret(int64(fd))
	}
	return fd, err
}

// Defer: the thread stays in kbox (Dispatch's lock released) until the
// Pending answers.
func (g *guest) Defer() dispatch.Pending {
	g.deferred = &pending{g: g, ch: make(chan int64, 1), intr: errRestartSys}
	return g.deferred
}

// waitDeferred waits for the deferred answer (or the end of the run).
func (g *guest) waitDeferred() int64 {
	p := g.deferred
	g.deferred = nil
	if p == nil {
		return -int64(unix.ENOSYS)
	}
	for {
		select {
		case v := <-p.ch:
			return v
		case <-g.t.wake:
			// A signal to take (or the end of the run) interrupts the
			// wait, as it interrupts a blocking syscall on Linux. The
			// call is abandoned: its goroutine sees Valid fail and a
			// later Reply refused (what it placed in the guest's fd
			// table is taken back), as the seccomp tier's notification
			// is gone after a signal, and the call ends with p.intr
			// (restart.go decides, with the handler's flags, whether
			// it restarts). An answer given first wins. A wait that
			// moves data answers itself (coop): it sees the signal
			// through Signalled.
			end := g.t.die.Load() || tr.ended.Load()
			if !end && (g.t.deliverable() == 0 || p.coop) {
				continue
			}
			if p.abandon(end) {
				if end {
					return -int64(unix.EINTR)
				}
				return -int64(p.intr)
			}
			// Answered, or claimed: the answer comes on p.ch (the end
			// of the run still abandons a claimed call).
			continue
		}
	}
}

type pending struct {
	g  *guest
	ch chan int64
	// intr ends the call when a signal abandons it (ERESTARTSYS, or
	// EINTR: InterruptWith); coop: the wait answers itself (Cooperate).
	// Both are set before the wait's goroutine starts.
	intr unix.Errno
	coop bool

	mu        sync.Mutex
	done      bool  // answered
	abandoned bool  // the thread stopped waiting (a signal)
	placed    []int // guest fds AddFD installed, taken back if abandoned
	claimed   bool  // the wait takes what it cannot put back (Claim)
	refused   bool  // a signal came while claimed: Release ends the call
}

var (
	errAnswered  = errors.New("trap: syscall already answered")
	errAbandoned = errors.New("trap: syscall interrupted, the answer is not wanted")
)

// abandon marks the call interrupted unless it was answered or, for a
// signal (not the end of the thread), is claimed; it reports whether it
// did. A claimed call is answered by its wait, or by Release.
func (p *pending) abandon(end bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
	}
	if p.claimed && !end {
		p.refused = true
		return false
	}
	p.abandoned = true
	for _, fd := range p.placed {
		tr.fds.release(fd)
	}
	p.placed = nil
	return true
}

func (p *pending) Valid() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.abandoned || tr.ended.Load() {
		return unix.ENOENT
	}
	return nil
}

func (p *pending) Pid() int { return p.g.t.tid }

// Claim keeps a signal from abandoning the call while its wait takes
// something it cannot put back (a connection off a listener's queue):
// the thread then waits for the answer, as Linux's accept returns a
// connection it dequeued before the signal. It reports false when the
// call is no longer waited for.
func (p *pending) Claim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.abandoned || tr.ended.Load() {
		return false
	}
	p.claimed = true
	return true
}

// Release ends a claim whose wait took nothing: a signal that came
// meanwhile ends the call now, with p.intr.
func (p *pending) Release() {
	p.mu.Lock()
	p.claimed = false
	refused := p.refused && !p.done
	p.mu.Unlock()
	if refused {
		p.Reply(-int64(p.intr))
	}
}

// InterruptsItself tells the engine that this tier ends a deferred call
// when a signal is to be taken (waitDeferred): it must not look for
// pending signals in /proc, where kbox's kick shows.
func (p *pending) InterruptsItself() {}

// InterruptWith sets what the call returns when a signal ends it.
func (p *pending) InterruptWith(en unix.Errno) { p.intr = en }

// Cooperate leaves ending the wait to its goroutine, which looks at
// Signalled: a send must count what it sent, a connect that got through
// must not be taken back.
func (p *pending) Cooperate() { p.coop = true }

// Signalled reports, for a cooperating wait, that its thread has a
// signal to take.
func (p *pending) Signalled() bool { return p.coop && p.g.t.deliverable() != 0 }

func (p *pending) AddFD(hostfd int, cloexec bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.abandoned {
		return -1, unix.ENOENT
	}
	fd, err := tr.fds.place(hostfd, 0, cloexec)
	if err == nil {
		p.placed = append(p.placed, fd)
	}
	return fd, err
}

func (p *pending) Reply(val int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return errAnswered
	}
	if p.abandoned {
		return errAbandoned
	}
	p.done = true
	p.placed = nil
	p.ch <- val
	return nil
}

func (p *pending) ReplyErrno(en unix.Errno) error { return p.Reply(-int64(en)) }

func (p *pending) Write(addr uint64, b []byte) error { return writeMem(&tr.mem, addr, b) }
