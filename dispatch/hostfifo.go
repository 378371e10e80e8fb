package dispatch

import (
	"time"

	"github.com/kbox-project/kbox/fifo"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Opens of a host FIFO (in a bind) that wait. A read-only open of a FIFO
// waits for a writer, a write-only one for a reader. kbox opens host files
// for the guest, and a serving thread that waited there would stall every
// guest, the one that would open the other end included. So a host open
// that may wait is tried non-blocking first (openHostNoWait), and one that
// must wait is deferred (hostFIFOWait). Guests and host processes may both
// open the FIFO, so kbox cannot pair the opens itself (as package fifo
// does for the image's FIFOs): the host kernel does.
//
//   - A reader holds a read end opened non-blocking (its token), which
//     counts as a reader, as Linux counts a waiting one: writers open at
//     once. It waits until a writer came (fifo.WriterCame, looked at with a
//     backoff up to sysabi.InterruptTick and at once when data comes), and
//     the token, made blocking, is its file.
//   - A writer's open is made blocking on a goroutine: it counts as a
//     writer. A guest that stops waiting (it died, or has a signal to take)
//     leaves that open waiting: kbox ends it with a read end opened
//     non-blocking and closed at once, before the guest is answered (a
//     retry of its open never meets that reader). Another writer waiting
//     on the FIFO then is let through, with no reader left, where Linux
//     would have it wait on.
//
// A signal ends the wait as it ends Linux's: fifo.RestartSys.

// mayWaitFIFO reports whether an open with flags could wait for a FIFO's
// other end: a blocking read-only or write-only open that is neither
// O_PATH nor O_DIRECTORY, nor sure to create a new file (O_EXCL).
func mayWaitFIFO(flags int) bool {
	acc := flags & unix.O_ACCMODE
	return flags&(unix.O_NONBLOCK|unix.O_PATH|unix.O_DIRECTORY) == 0 &&
		(acc == unix.O_RDONLY || acc == unix.O_WRONLY) &&
		flags&(unix.O_CREAT|unix.O_EXCL) != unix.O_CREAT|unix.O_EXCL
}

// hostOpen says what openHostNoWait opened.
type hostOpen uint8

const (
	hostOther hostOpen = iota // a file that is no FIFO
	hostFIFO                  // a FIFO's end: kbox's copy closes before the guest resumes
	hostWait                  // nothing: the open must wait (hostFIFOWait)
)

// openHostNoWait is openHostAs for a host target, never waiting: an open
// that may wait is made non-blocking, and one that would have waited (a
// FIFO without its other end, or any FIFO opened for reading, whose
// writers only the blocking open can count) returns hostWait, with a
// non-blocking read end of the FIFO for a read-only open (else -1).
func (e *Engine) openHostNoWait(r *Request, t guestpath.Target, flags int, mode uint32) (fd int, how hostOpen, err error) {
	if flags&(unix.O_PATH|unix.O_DIRECTORY) != 0 {
		fd, err = e.openHostAs(r, t, flags, mode)
		return fd, hostOther, err
	}
	wait := mayWaitFIFO(flags)
	hflags := flags
	if wait {
		hflags |= unix.O_NONBLOCK
	}
	fd, err = e.openHostAs(r, t, hflags, mode)
	switch {
	case err == unix.ENXIO && wait && flags&unix.O_ACCMODE == unix.O_WRONLY:
		return -1, hostWait, nil // no reader (or a device that is not there: the wait's open says)
	case err != nil:
		return -1, hostOther, err
	}
	how = hostOther
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		how = hostFIFO
		if wait && flags&unix.O_ACCMODE == unix.O_RDONLY {
			return fd, hostWait, nil // the wait's token (hostFIFOWait)
		}
	}
	if wait {
		if err = guestStatusFlags(fd, flags); err != nil {
			unix.Close(fd)
			return -1, hostOther, err
		}
	}
	return fd, how, nil
}

// guestStatusFlags gives fd, opened non-blocking, the status flags of the
// guest's open flags, blocking as that open was (F_SETFL keeps O_ASYNC as
// open left it: set, with no owner).
func guestStatusFlags(fd, flags int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags&(setflMask|unix.O_ASYNC)&^unix.O_NONBLOCK)
	return err
}

// hostFIFOWait serves an open of host target t that must wait: deferred,
// and answered with the fd once the other end came (or with the open's
// error). token is a reader's token, else -1: a writer's blocking open
// goes through an O_PATH fd of t, the file the first try found.
func (e *Engine) hostFIFOWait(r *Request, t guestpath.Target, flags int, cloexec bool, token int) Result {
	if token >= 0 {
		if came, err := fifo.WriterCame(token); err != nil || came {
			if err == nil {
				err = guestStatusFlags(token, flags)
			}
			var gfd int
			if err == nil {
				gfd, err = r.G.AddFD(token, -1, cloexec)
			}
			unix.Close(token)
			if err != nil {
				return fail(err, Host)
			}
			return ok(int64(gfd), Host) // a writer is there: no wait
		}
		p := deferWait(r, false, true) // the wait answers a signal itself
		go e.waitHostReader(p, token, flags, cloexec)
		return deferred(Host)
	}
	pfd, err := e.openHostAs(r, t, flags&unix.O_NOFOLLOW|unix.O_PATH, 0)
	if err != nil {
		return fail(err, Host)
	}
	p := deferWait(r, false, true)
	go e.waitHostWriter(p, pfd, flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW)|unix.O_NOCTTY|unix.O_CLOEXEC, cloexec)
	return deferred(Host)
}

// waitHostReader waits until a writer came to the FIFO read through tok,
// then gives tok (blocking, with the status flags of the guest's open
// flags) to the guest waiting in p. It owns tok.
func (e *Engine) waitHostReader(p Pending, tok, flags int, cloexec bool) {
	nap := time.Millisecond
	for {
		came, err := fifo.WriterCame(tok)
		switch {
		case err != nil:
			unix.Close(tok)
			e.late(func() { p.ReplyErrno(fail(err, Host).Errno) })
			return
		case came:
			if err := guestStatusFlags(tok, flags); err != nil {
				unix.Close(tok)
				e.late(func() { p.ReplyErrno(fail(err, Host).Errno) })
				return
			}
			e.giveHostFd(p, tok, cloexec)
			return
		}
		if gone := p.Valid() != nil; gone || signalled(p) {
			unix.Close(tok)
			if !gone {
				e.late(func() { p.ReplyErrno(fifo.RestartSys) })
			}
			return
		}
		// Data or a writer's leaving wakes the poll; a writer that
		// writes nothing is seen at the next look.
		unix.Poll([]unix.PollFd{{Fd: int32(tok), Events: unix.POLLIN}}, int(nap.Milliseconds()))
		nap = min(2*nap, sysabi.InterruptTick)
	}
}

// giveHostFd installs host fd fd in the guest waiting in p, closes it,
// and answers p with the guest's fd: closed before the answer, kbox's copy
// is no reader or writer the guest could see.
func (e *Engine) giveHostFd(p Pending, fd int, cloexec bool) {
	answered := false
	e.late(func() {
		gfd, err := p.AddFD(fd, cloexec)
		unix.Close(fd)
		answered = true
		if err != nil {
			p.ReplyErrno(fail(err, Host).Errno)
		} else {
			p.Reply(int64(gfd))
		}
	})
	if !answered {
		unix.Close(fd)
	}
}

// waitHostWriter makes the blocking open (hflags) of the file of O_PATH fd
// pfd, and answers p; it owns pfd. Every sysabi.InterruptTick it looks
// whether the guest still waits.
func (e *Engine) waitHostWriter(p Pending, pfd, hflags int, cloexec bool) {
	defer unix.Close(pfd)
	link := guestpath.ProcFd(pfd)
	type opened struct {
		fd  int
		err error
	}
	got := make(chan opened, 1)
	go func() {
		fd, err := unix.Open(link, hflags, 0)
		for err == unix.EINTR {
			fd, err = unix.Open(link, hflags, 0)
		}
		got <- opened{fd, err}
	}()
	tick := time.NewTicker(sysabi.InterruptTick)
	defer tick.Stop()
	for {
		select {
		case o := <-got:
			if o.err != nil {
				e.late(func() { p.ReplyErrno(fail(o.err, Host).Errno) })
			} else {
				e.giveHostFd(p, o.fd, cloexec)
			}
			return
		case <-tick.C:
		}
		gone := p.Valid() != nil
		if !gone && !signalled(p) {
			continue
		}
		drained := false
		if fd, err := unix.Open(link, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			select {
			case o := <-got:
				if o.err == nil {
					unix.Close(o.fd)
				}
				drained = true
			case <-time.After(sysabi.InterruptTick):
			}
			unix.Close(fd)
		}
		if !drained {
			go func() { // not a FIFO's open (a device's): it may wait on
				if o := <-got; o.err == nil {
					unix.Close(o.fd)
				}
			}()
		}
		if !gone {
			e.late(func() { p.ReplyErrno(fifo.RestartSys) })
		}
		return
	}
}
