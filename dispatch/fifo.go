package dispatch

import (
	"github.com/kbox-project/kbox/fifo"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// openFIFO serves an open of a FIFO of the image (st is its LKL stat, p its
// guest path) with the host FIFO behind it (package fifo): the guest gets a
// host fd, so its reads and writes never reach kbox. An open that must wait
// for the other end is deferred and parked; it is answered when the other
// end opens.
//
// kbox closes its own copy of the fd before the guest resumes (AddFD, then
// the answer), so that it never counts as a reader or writer that the
// guest could notice (an EOF or an ENXIO that comes late).
func (e *Engine) openFIFO(r *Request, st *lkl.Stat64, p string, flags int) Result {
	k := fifo.Key{Dev: st.Dev, Ino: st.Ino}
	hfd, parked, err := e.FIFOs.Open(k, flags, func() fifo.Opener { return deferWait(r, false, false) })
	if err != nil {
		return fail(err, Emulated)
	}
	e.FIFOs.Name(k, p) // what /proc/PID/fd shows (procfs.HostFdRef)
	if parked {
		return deferred(Emulated)
	}
	gfd, err := r.G.AddFD(hfd, -1, flags&unix.O_CLOEXEC != 0)
	unix.Close(hfd)
	if err != nil {
		return fail(err, Emulated)
	}
	return ok(int64(gfd), Emulated)
}
