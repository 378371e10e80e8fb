package dispatch

import (
	"os"
	"strconv"

	"github.com/kbox-project/kbox/guestpath"
)

// Binds (-b) are package guestpath's: here are the engine's views of
// them and the results its handlers give.

// bindOf returns the bind holding guest path p.
func (e *Engine) bindOf(p string) *guestpath.Bind { return guestpath.BindOf(e.Opt.Binds, p) }

// bindGuestPath maps a host path (of a guest fd) inside a bind back to its
// guest path.
func (e *Engine) bindGuestPath(host string) (string, bool) {
	return guestpath.GuestPath(e.Opt.Binds, host)
}

// bindOp runs a one-path modification (an LKL syscall number of pathOp,
// with its extra arguments) on a bind target.
func bindOp(t guestpath.Target, nr uintptr, rest []uintptr) Result {
	denied, err := t.Bind.Op(t.Rel, nr, rest)
	if denied {
		return fail(err, Denied)
	}
	return hostDone(err)
}

// bindTwo runs rename or link between two targets of the same bind.
func bindTwo(t1, t2 guestpath.Target, nr uintptr, flags uintptr) Result {
	return hostDone(t1.Bind.Two(t1.Rel, t2.Rel, nr, flags))
}

// bindSymlink makes a symlink at t holding tgt verbatim: whatever it says,
// it is resolved inside the bind.
func bindSymlink(t guestpath.Target, tgt string) Result {
	return hostDone(t.Bind.Symlink(t.Rel, tgt))
}

// hostDone is the result of a change the host made: 0 or its error.
func hostDone(err error) Result {
	if err != nil {
		return fail(err, Host)
	}
	return ok(0, Host)
}

// roHostFd reports a guest host fd opened in a read-only bind: fd-based
// changes through it (fchmod, fchown, futimens) are refused with EROFS.
func (e *Engine) roHostFd(r *Request, fd int) bool {
	if !e.anyRO {
		return false
	}
	l, err := os.Readlink("/proc/" + strconv.Itoa(r.P.Tgid) + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	g, ok := e.bindGuestPath(l)
	if !ok {
		return false
	}
	return e.bindOf(g).ReadOnly
}
