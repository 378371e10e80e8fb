package dispatch

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The guest's umask is a host process attribute: fork copies it, exec
// keeps it, and the host kernel answers umask(2). But the files it governs
// are created in LKL, whose own task has a umask of its own (022). So kbox
// keeps each guest process's umask (Proc.umask: read from /proc/PID/status
// "Umask:" when kbox first sees the process, then kept by its umask(2)
// calls, which are notified and continued), sets LKL's umask to 0 once,
// and takes the guest's umask out of the mode of every create it serves
// in LKL: open/openat/openat2/creat with O_CREAT or O_TMPFILE, mkdir(at),
// mknod(at). LKL has no POSIX ACLs, so that is exactly what Linux does.
// Creates in a bind run on the host under the guest's umask (withUmask).

// sysUmask serves umask(2): kept per process, continued.
func sysUmask(e *Engine, r *Request) Result {
	r.P.umask.Store(uint32(r.Args[0]) & 0o777)
	return cont // the host keeps it too and returns the old one
}

// lklUmaskZero makes LKL's umask 0: the guest's is applied by kbox. LKL's
// host threads share one fs_struct, so one call holds for all of them.
func lklUmaskZero() { lkl.Syscall6(lkl.SysUmask, 0, 0, 0, 0, 0, 0) }

// createMode is mode as an open with flags creates it: the guest's umask
// taken out when the open may create.
func createMode(r *Request, flags int, mode uint32) uint32 {
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 || r.P == nil {
		return mode
	}
	return mode &^ r.P.umask.Load()
}

// umasked is a mkdir or mknod mode with the guest's umask taken out (the
// file type bits of mknod are not permission bits and stay).
func umasked(r *Request, mode uint64) uintptr {
	return uintptr(mode &^ uint64(r.P.umask.Load()))
}

// hostUmaskMu serializes withUmask: the umask is one per kbox process.
var hostUmaskMu = make(chan struct{}, 1)

// withUmask runs a create on the host (in a bind) under umask mask, as
// the guest's own create would (a host directory's default ACL then
// applies as on Linux), and puts kbox's umask back.
func withUmask(mask uint32, fn func()) {
	hostUmaskMu <- struct{}{}
	old := unix.Umask(int(mask))
	defer func() {
		unix.Umask(old)
		<-hostUmaskMu
	}()
	fn()
}
