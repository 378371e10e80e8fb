package dispatch

import (
	"time"

	"github.com/kbox-project/kbox/fifo"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Deferred calls and signals. A call kbox defers (a FIFO open, a socket
// call that waits) ends as Linux ends a wait that a handled signal
// interrupts: with ERESTARTSYS, which the kernel turns into a restart of
// the call after the handler when the handler has SA_RESTART and into
// EINTR otherwise (signal(7)); with EINTR whatever the handler's flags
// when the socket has a timeout (SO_RCVTIMEO, SO_SNDTIMEO: Linux's
// sock_intr_errno). Stops and signals without a handler restart it.
//
// How the wait learns of the signal is the tier's: in the seccomp tier a
// guest waiting in a notified syscall takes only fatal signals
// (WAIT_KILLABLE_RECV), so the wait looks at /proc/TID/status
// (fifo.Interrupted) every sysabi.InterruptTick and answers; the in-process
// tiers see their emulated signals at once and end the wait themselves
// (the Pending implements InterruptWith), except for a wait that moves
// data (a send, a unix connect): there the tier leaves the answer to the
// wait (Cooperate), which sees the signal through the Pending
// (Signalled), so that what was sent is counted and a connection made is
// not taken back.

// intrErrno is what a wait ended by a handled signal answers: EINTR when
// the socket has a timeout, else ERESTARTSYS.
func intrErrno(timeout bool) unix.Errno {
	if timeout {
		return unix.EINTR
	}
	return fifo.RestartSys
}

// deferWait defers r for a wait a signal may end (intrErrno(timeout)).
// coop: the wait answers itself when signalled (a send, a connect).
func deferWait(r *Request, timeout, coop bool) Pending {
	p := r.G.Defer()
	if t, ok := p.(interface{ InterruptWith(unix.Errno) }); ok {
		t.InterruptWith(intrErrno(timeout))
	}
	if coop {
		if t, ok := p.(interface{ Cooperate() }); ok {
			t.Cooperate()
		}
	}
	return p
}

// watchInterrupt answers p with ERESTARTSYS when a signal that would
// interrupt the guest's wait is pending, until stop is closed. The
// in-process tiers interrupt their waits themselves, and are left out
// (interruptsItself).
func (e *Engine) watchInterrupt(p Pending, stop <-chan struct{}) {
	if interruptsItself(p) {
		return
	}
	t := time.NewTicker(sysabi.InterruptTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if p.Valid() != nil {
			return
		}
		if signalled(p) {
			e.late(func() { p.ReplyErrno(fifo.RestartSys) })
			return
		}
	}
}

// interruptsItself reports whether p's tier ends a deferred call itself
// when a signal is to be taken (the trap tier: its guest threads block
// host signals but kbox's own kick, which /proc would show as pending).
func interruptsItself(p Pending) bool {
	_, ok := p.(interface{ InterruptsItself() })
	return ok
}

// signalled reports whether the guest waiting in p has a signal to take
// that ends its wait: the tier says (Signalled) when it knows, else
// /proc/TID/status tells (fifo.Interrupted). A tier that ends its waits
// itself says so only for the waits that answer themselves (Cooperate).
func signalled(p Pending) bool {
	if s, ok := p.(interface{ Signalled() bool }); ok {
		return s.Signalled()
	}
	return !interruptsItself(p) && fifo.Interrupted(p.Pid())
}
