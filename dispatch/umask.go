package dispatch

import (
	"path"
	"strings"

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
// mknod(at), and the node of a bound socket, unless the directory it is
// made in has a default ACL, which then gives the new file its
// permissions in place of the umask, as on Linux (LKL applies it). Creates
// in a bind run on the host under the guest's umask (withUmask).

// lklUmaskZero makes LKL's umask 0: the guest's is applied by kbox. LKL's
// host threads share one fs_struct, so one call holds for all of them.
func lklUmaskZero() { lkl.Syscall6(lkl.SysUmask, 0, 0, 0, 0, 0, 0) }

// createMode is mode as an open with flags of LKL path p creates it: the
// guest's umask taken out when the open may create.
func createMode(r *Request, p string, flags int, mode uint32) uint32 {
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 || r.P == nil {
		return mode
	}
	dir := parentDir(p)
	if flags&unix.O_TMPFILE == unix.O_TMPFILE {
		dir = p // an unnamed file in directory p
	}
	return uint32(umaskIn(r, dir, uint64(mode)))
}

// umasked is the mode of a mkdir or mknod of LKL path p with the guest's
// umask taken out (the file type bits of mknod are not permission bits
// and stay).
func umasked(r *Request, p string, mode uint64) uintptr {
	return uintptr(umaskIn(r, parentDir(p), mode))
}

// umaskIn takes the guest's umask out of the mode of a file made in LKL
// directory dir, unless dir has a default ACL (then the ACL decides).
func umaskIn(r *Request, dir string, mode uint64) uint64 {
	mask := uint64(r.P.umask.Load())
	if mode&mask == 0 || lklDefaultACL(dir) {
		return mode
	}
	return mode &^ mask
}

// parentDir is the directory holding LKL path p's last component.
func parentDir(p string) string {
	if t := strings.TrimRight(p, "/"); t != "" {
		p = t
	}
	return path.Dir(p)
}

// aclDefault is the name of a directory's default ACL, NUL-terminated for
// LKL.
var aclDefault = []byte("system.posix_acl_default\x00")

// lklDefaultACL reports whether LKL directory dir has a default ACL (with
// the caller's credentials: reading it needs search permission only).
func lklDefaultACL(dir string) bool {
	n, le := lklPath(lkl.SysGetxattr, 0, dir, [6]uintptr{0, uptr(aclDefault), 0, 0})
	return le == 0 && n > 0
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
