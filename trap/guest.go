//go:build linux && amd64 && cgo

package trap

import (
	"errors"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// guest is dispatch.Guest for a syscall of one guest thread: the guest's
// memory is kbox's own (read and written directly, fault-safe: unsafe.go),
// its fds live in kbox's fd table below the guest's limit (fds.go).
type guest struct {
	t *thread
	// deferred: the handler called Defer; the thread waits on it.
	deferred chan int64
}

var _ dispatch.Guest = (*guest)(nil)

func (g *guest) Pid() int { return g.t.tid }

func (g *guest) Read(addr uint64, b []byte) error { return readMem(addr, b) }

func (g *guest) ReadSome(addr uint64, b []byte) (int, error) { return readSome(addr, b) }

func (g *guest) Write(addr uint64, b []byte) error { return writeMem(&tr.mem, addr, b) }

// WriteForce is Write: the seccomp tier needs it for exec's path strings,
// which this tier does not rewrite.
func (g *guest) WriteForce(addr uint64, b []byte) error { return g.Write(addr, b) }

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

// Defer: the thread stays in kbox (Dispatch's lock released) until the
// Pending answers.
func (g *guest) Defer() dispatch.Pending {
	g.deferred = make(chan int64, 1)
	return &pending{g: g, ch: g.deferred}
}

// waitDeferred waits for the deferred answer (or the end of the run).
func (g *guest) waitDeferred() int64 {
	ch := g.deferred
	g.deferred = nil
	if ch == nil {
		return -int64(unix.ENOSYS)
	}
	for {
		select {
		case v := <-ch:
			return v
		case <-g.t.wake:
			// A signal to take (or the end of the run) interrupts the
			// wait, as it interrupts a blocking syscall on Linux; a
			// late answer goes to the buffered channel, unread.
			if g.t.die.Load() || tr.ended.Load() || g.t.deliverable() != 0 {
				return -int64(unix.EINTR)
			}
		}
	}
}

type pending struct {
	g    *guest
	ch   chan int64
	done bool
}

var errAnswered = errors.New("trap: syscall already answered")

func (p *pending) Valid() error {
	if p.done || tr.ended.Load() {
		return unix.ENOENT
	}
	return nil
}

func (p *pending) Pid() int { return p.g.t.tid }

func (p *pending) AddFD(hostfd int, cloexec bool) (int, error) {
	return tr.fds.place(hostfd, 0, cloexec)
}

func (p *pending) Reply(val int64) error {
	if p.done {
		return errAnswered
	}
	p.done = true
	p.ch <- val
	return nil
}

func (p *pending) ReplyErrno(en unix.Errno) error { return p.Reply(-int64(en)) }

func (p *pending) Write(addr uint64, b []byte) error { return writeMem(&tr.mem, addr, b) }
