package supervisor

import "github.com/kbox-project/kbox/seccomp"

// backlog holds notifications the serving loop received before their
// turn. A notified syscall is interruptible until kbox has received it
// (WAIT_KILLABLE_RECV makes it killable-only from then on): a signal
// with a handler that comes in that window makes the kernel end the
// call with ERESTARTSYS, which is EINTR for a handler without SA_RESTART,
// even for calls that Linux never interrupts (kill, stat, open of a
// file). While one notification is served, the others wait unreceived,
// so the serving loop receives every waiting one (drain) before it
// serves the next: the window shrinks from the time spent serving all
// those before to about the time spent serving one (docs/tiers.md,
// "Signals and notified calls").
//
// The poll costs a syscall per notification, for nothing when one task
// alone makes calls (none ever waits): after a poll that found none, the
// loop skips the next 1, 2, 4 ... up to 32 notifications before it polls
// again, and polls at every one again once a poll found one.
type backlog struct {
	q    [64]seccomp.Notif
	head int
	n    int
	skip int // notifications left before the next poll
	gap  int // the last skip
}

// drain receives the notifications waiting on l, as many as there is
// room for. A Recv after a readable Poll does not block: the kernel
// counts a notification withdrawn meanwhile (its task died or took a
// signal) until a Recv consumes it with ENOENT.
func (b *backlog) drain(l *seccomp.Listener) {
	if b.skip > 0 {
		b.skip--
		return
	}
	found := false
	for b.n < len(b.q) {
		if readable, _, err := l.Poll(0); err != nil || !readable {
			break
		}
		found = true
		if l.Recv(&b.q[(b.head+b.n)%len(b.q)]) == nil {
			b.n++
		}
	}
	switch {
	case found:
		b.gap = 0
	case b.gap == 0:
		b.gap = 1
	default:
		b.gap = min(2*b.gap, 32)
	}
	b.skip = b.gap
}

// next moves the oldest notification received into n; false when none.
func (b *backlog) next(n *seccomp.Notif) bool {
	if b.n == 0 {
		return false
	}
	*n = b.q[b.head]
	b.head = (b.head + 1) % len(b.q)
	b.n--
	return true
}
