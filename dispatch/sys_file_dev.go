package dispatch

import (
	"strconv"
	"strings"
	"time"

	"github.com/kbox-project/kbox/fifo"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/hostdev"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/loopdev"
	"golang.org/x/sys/unix"
)

// The file calls' glue for device nodes and /dev: opens of device nodes
// (openDevice, devOpen), kbox's devpts instance at /dev/pts, /dev/fd and
// /dev/std*, and the exclusive opens of LKL's loop devices. Package
// guestpath decides what a node opens by its numbers (DevOpenOf), the
// devpts instance, the controlling terminal and the /dev/fd names;
// package loopdev which of LKL's devices a guest may open. What acts on a
// request (installs a host fd in the guest, resolves beneath a guest fd)
// is here.
//
// The guest's /dev and /sys (docs/guest-view.md, "/dev and /sys").
//
// /dev is an image path: LKL's ramfs with the nodes and links that
// rootfs/dev.go makes (or, without the recommended mounts, the image's own
// /dev). Listing, stat, readlink, mknod and unlink there are LKL's. What a
// device node opens is kbox's decision, by the node's numbers, wherever
// the node is (a node made with mknod in the image or in /tmp too):
//
//   - null, zero, full, random and urandom (1:3, 1:5, 1:7, 1:8, 1:9) open
//     the host's own devices, installed in the guest as host fds, so I/O
//     on them is native;
//   - tty (5:0) opens the caller's controlling terminal, found from its
//     /proc/PID/stat, ENXIO without one, as on Linux;
//   - ptmx (5:2) opens the ptmx of kbox's private devpts instance, shown
//     at /dev/pts (ptys the host's /dev/pts never lists);
//   - loop-control (10:237) and the loop devices (block, major 7) open
//     LKL's own, as virtual fds, when the kernel has the loop driver
//     (package loopdev): devices a root guest makes and backs with its own
//     LKL files, never LKL's disks;
//   - every other character device fails with ENXIO, and every other
//     block device too, as on a kernel without that driver: LKL's other
//     drivers (its kernel log, its memory, its disks: the image's and
//     /tmp's) are never opened for a guest, and no node reaches any other
//     host device.
//
// /dev/pts is kbox's own devpts instance (shadowfd.Manager.Devpts), made on
// first use and served as a bind whose root is the instance: paths beneath
// it resolve with openat2(RESOLVE_IN_ROOT), confined to it.
//
// /sys is LKL's sysfs, with one host route: the host's CPU topology at
// guestpath.CPURoute, read-only.

// ptsBind returns the devpts instance shown at /dev/pts, mounting it on
// first use, or nil when the guest has no /dev of kbox's or no instance
// could be mounted (one warning says why).
func (e *Engine) ptsBind() *guestpath.Bind {
	if !e.Opt.Dev {
		return nil
	}
	return e.pts.Bind(e.Shadows)
}

// devTarget returns the Target of guest path abs when it lies in /dev/pts
// and kbox has a devpts instance there.
func (e *Engine) devTarget(abs string) (guestpath.Target, bool) {
	if !e.Opt.Dev || !guestpath.UnderPts(abs) {
		return guestpath.Target{}, false
	}
	b := e.ptsBind()
	if b == nil {
		return guestpath.Target{}, false // LKL's empty directory
	}
	return b.Target(abs), true
}

// devOpen serves the open of a device node of the image, of file type
// mode and number rdev, once LKL found it and allowed the open (its
// permissions, with the caller's credentials): guestpath.DevOpenOf says
// what it opens (see the top of this file). The file kbox opens is
// installed in the guest as a host fd.
func (e *Engine) devOpen(r *Request, mode uint32, rdev uint64, flags int) Result {
	what, host := guestpath.DevOpenOf(mode, rdev)
	if what == guestpath.DevOpensNone {
		return errno(unix.ENXIO, Emulated)
	}
	hflags := guestpath.DevOpenFlags(flags)
	var hfd int
	var err error
	switch what {
	case guestpath.DevOpensHost:
		hfd, err = guestpath.OpenHostDev(host, rdev, hflags)
	case guestpath.DevOpensCtty:
		hfd, err = e.openCtty(r, hflags)
	case guestpath.DevOpensPtmx:
		b := e.ptsBind()
		if b == nil {
			return errno(unix.ENODEV, Emulated)
		}
		hfd, err = b.OpenIn("ptmx", hflags|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return fail(err, Host)
	}
	defer unix.Close(hfd)
	gfd, err := r.G.AddFDReply(hfd, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Host)
	}
	return answered(int64(gfd), Host)
}

// openDevice serves the open of a device node in /dev from its stat (the
// stat cache's, while nothing changed LKL) and, for a caller without
// CAP_DAC_OVERRIDE, LKL's faccessat2 for the access asked, instead of an
// open, fstat and close in LKL: `> /dev/null` is in every other shell
// script. done is false when the open must take the general path (not a
// device, not in /dev, flags that make open differ from stat); nothing
// has happened then. /dev/shm holds files: it is left alone
// (guestpath.InDev).
func (e *Engine) openDevice(r *Request, t guestpath.Target, flags int) (Result, bool) {
	const general = unix.O_PATH | unix.O_EXCL | unix.O_DIRECTORY | unix.O_TMPFILE
	if t.Host || flags&general != 0 || !guestpath.InDev(t.Path) {
		return Result{}, false
	}
	var st lkl.Stat64
	if e.lklStat(r, t.LKLPath(), flags&unix.O_NOFOLLOW != 0, &st) != 0 || !guestpath.IsDevice(st.Mode) || lklDevice(st.Mode, st.Rdev) {
		return Result{}, false // the general path reports the error, opens LKL's devices
	}
	if !r.P.creds().vfsRoot {
		mode := unix.R_OK
		switch flags & unix.O_ACCMODE {
		case unix.O_WRONLY:
			mode = unix.W_OK
		case unix.O_RDWR:
			mode = unix.R_OK | unix.W_OK
		}
		if le := lklAccess(r, t.LKLPath(), mode, unix.AT_EACCESS); le != 0 {
			return errno(le, LKL), true
		}
	}
	return e.devOpen(r, st.Mode, st.Rdev, flags), true
}

// openCtty opens the controlling terminal of the calling guest process
// (guestpath.OpenCtty).
func (e *Engine) openCtty(r *Request, flags int) (int, error) {
	return guestpath.OpenCtty(r.P.Tgid, flags, e.ptsBind)
}

// /dev/fd, /dev/stdin, /dev/stdout and /dev/stderr (with kbox's /dev).
//
// They are symbolic links in LKL's /dev (rootfs/dev.go) to /proc/self/fd,
// as on Linux, so lstat, readlink and ls -l show links. Followed, LKL
// would resolve them in its own proc, whose fds are kbox's LKL fds: kbox
// resolves them itself, as the kernel resolves /proc/self/fd/N, to the
// caller's own fd N:
//   - beneath the link (/dev/fd/N/name), the path is resolved as
//     openat(N, "name") would;
//   - an open of /dev/fd/N opens the file fd N is: an image file again by
//     its path (a virtual fd's, or a shadow's image file), a file of a
//     host route or bind by its guest path, and a file with no path (a
//     pipe, a terminal, a device, a memfd) as the kernel reopens it
//     through /proc/PID/fd/N; a socket gives ENXIO, a closed fd ENOENT;
//   - stat, statx and access of it report the file fd N is.
//   - exec and statfs of it act on the file of fd N by its guest path;
//   - /dev/fd itself, followed, is /proc/self/fd (as /proc serves it);
//   - lstat and readlink of /dev/fd/N are /proc/self/fd/N's (the link);
//     those of /dev/fd and /dev/std* LKL's links;
//   - no call changes them: chmod, chown, truncate, utimes, unlink,
//     rename, mkdir and the like of /dev/fd, /dev/fd/N and /dev/std*
//     give EACCES (LKL would follow the links into its own proc, where
//     the fds are kbox's; Linux's devtmpfs would let root remove them).
// No path of the guest reaches LKL's /proc/self/fd through them.

// devFd returns the guest fd named by the clean guest path abs through
// /dev/fd/N or /dev/std*, and the path beneath it ("" for the fd itself),
// with kbox's /dev only.
func (e *Engine) devFd(abs string) (int, string, bool) {
	if !e.Opt.Dev {
		return 0, "", false
	}
	return guestpath.DevFd(abs)
}

// beneathFd resolves rest beneath guest fd fd (a /dev/fd/N path abs), or
// marks the fd itself (fd -1: /dev/fd) when rest is empty.
func (e *Engine) beneathFd(r *Request, abs string, fd int, rest string) (guestpath.Target, unix.Errno) {
	if r.fdHops++; r.fdHops > guestpath.MaxFdHops {
		return guestpath.Target{}, unix.ELOOP
	}
	switch {
	case fd < 0:
		return guestpath.Target{Path: abs, FdDir: true}, 0
	case fd < e.Opt.VirtualFDs && r.P != nil && e.hostFdHidden(r.P.Tgid, fd):
		// kbox's own fd (an in-process tier's guest is kbox's process):
		// none of the guest's, as /proc/self/fd shows.
		return guestpath.Target{}, unix.ENOENT
	case rest == "":
		if e.Opt.Policy != nil && e.Opt.Policy.paths && r.P != nil {
			// The fd's file by its path now (policy.go).
			if ref, en := e.fdRefOf(r.P.Tgid, fd); en == 0 && ref.Path != "" {
				ft := guestpath.Target{Host: true, Path: ref.Path}
				if en := e.policyPath(r, &ft); en != 0 {
					return guestpath.Target{}, en
				}
			}
		}
		return guestpath.Target{Path: abs, Fd: fd + 1}, 0
	}
	return e.resolveAt(r, int32(fd), rest)
}

// followDev is what a call that follows the final link makes of /dev/fd:
// the target of /proc/self/fd (whatever /proc serves there).
func (e *Engine) followDev(r *Request, t guestpath.Target) (guestpath.Target, unix.Errno) {
	if !t.FdDir {
		return t, 0
	}
	return e.classify(r, "/proc/self/fd")
}

// devLinkDir resolves /dev/fd, /dev/fd/N, /dev/stdin, stdout or stderr
// written with a trailing "/" or "/." (tail) into *t: the kernel follows
// a link before a slash, so the path names the directory the link leads
// to (/proc/self/fd's node; fd N's directory, ENOTDIR for any other file).
func (e *Engine) devLinkDir(r *Request, t *guestpath.Target, tail string) unix.Errno {
	if t.FdDir {
		nt, en := e.followDev(r, *t)
		if en != 0 {
			return en
		}
		*t = nt
		t.KeepTail(tail)
		return 0
	}
	if r.fdHops++; r.fdHops > guestpath.MaxFdHops {
		return unix.ELOOP
	}
	nt, en := e.resolveAt(r, int32(t.Fd-1), "."+tail)
	switch en {
	case 0:
		*t = nt
	case unix.EBADF:
		en = unix.ENOENT // no such fd: no such name in /proc/self/fd
	}
	return en
}

// followDevFd is followDev that also takes /dev/fd/N to the file of fd N by
// its guest path (fdTarget), for calls that follow the final link and
// need a path (exec, statfs): a file with no path (a pipe) gives EACCES.
func (e *Engine) followDevFd(r *Request, t guestpath.Target) (guestpath.Target, unix.Errno) {
	if t.Fd == 0 {
		return e.followDev(r, t)
	}
	ft, en := e.fdTarget(r, int32(t.Fd-1))
	if en == unix.EBADF {
		en = unix.ENOENT
	}
	return ft, en
}

// procFdLink is what a call that does not follow the final link makes of
// /dev/fd/N: /proc/self/fd/N, the link itself, as /proc serves it.
// /dev/stdin, stdout, stderr and /dev/fd are LKL's links.
func (e *Engine) procFdLink(r *Request, t guestpath.Target) (guestpath.Target, unix.Errno) {
	if t.Fd == 0 || !strings.HasPrefix(t.Path, "/dev/fd/") {
		return t, 0
	}
	return e.classify(r, "/proc/self/fd/"+strconv.Itoa(t.Fd-1))
}

// fdLink returns the /proc link through which kbox reaches the file of
// guest fd fd, a host file: the guest's own, or kbox's copy of a host file
// kept in the virtual table.
func fdLink(r *Request, fd int) string {
	if hfd, isHost := hostFile(r, uint64(uint32(fd))); isHost {
		return guestpath.ProcFd(hfd)
	}
	return "/proc/" + strconv.Itoa(r.P.Tgid) + "/fd/" + strconv.Itoa(fd)
}

// openFd serves the open of /dev/fd/N.
func (e *Engine) openFd(r *Request, fd int, flags int, mode uint32) Result {
	if fd >= 0 && !r.P.FDs.IsVirtual(fd) || isHostFile(r, int32(fd)) {
		if e.Shadows.OfGuestFd(r.P.Tgid, fd) == nil {
			if res, done := e.reopen(r, fdLink(r, fd), flags); done {
				return res
			}
		}
	}
	t, en := e.fdTarget(r, int32(fd))
	switch {
	case en == unix.EBADF:
		return errno(unix.ENOENT, Emulated)
	case en != 0:
		return errno(en, Emulated)
	}
	return e.openTarget(r, t, flags, mode)
}

// reopen opens a host file with no guest path (a pipe, a terminal, a
// device, a memfd) through its /proc link, as the kernel opens
// /proc/self/fd/N, and installs it in the guest. Files with a guest path
// (directories, regular files of a host route or bind) are not done here:
// they are opened again by path, confined.
func (e *Engine) reopen(r *Request, link string, flags int) (Result, bool) {
	var st unix.Stat_t
	if err := unix.Stat(link, &st); err != nil {
		return errno(unix.ENOENT, Host), true
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return errno(unix.ENXIO, Host), true
	case unix.S_IFDIR:
		return Result{}, false
	case unix.S_IFREG:
		if _, en := e.hostLinkPath(link); en == 0 {
			return Result{}, false // a file of a host route or bind
		}
	}
	hflags := flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_DIRECTORY) | unix.O_NOCTTY | unix.O_CLOEXEC
	if flags&unix.O_DIRECTORY != 0 {
		return errno(unix.ENOTDIR, Host), true
	}
	fifo := st.Mode&unix.S_IFMT == unix.S_IFIFO && flags&unix.O_NONBLOCK == 0
	if fifo {
		// A blocking open of a pipe's end waits for the other end,
		// here on kbox's serving thread: opened non-blocking (the
		// pipe's other end is the one the guest holds), then made
		// blocking as asked.
		hflags |= unix.O_NONBLOCK
	}
	hfd, err := unix.Open(link, hflags, 0)
	if err != nil {
		return fail(err, Host), true
	}
	defer unix.Close(hfd)
	if fifo {
		if fl, err := unix.FcntlInt(uintptr(hfd), unix.F_GETFL, 0); err == nil {
			unix.FcntlInt(uintptr(hfd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
		}
	}
	gfd, err := r.G.AddFDReply(hfd, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Host), true
	}
	return answered(int64(gfd), Host), true
}

// statDevFd writes to the guest at out the stat of the file of guest fd fd,
// as stat(2) through /dev/fd/N reports it.
func (e *Engine) statDevFd(r *Request, fd int, out uint64) Result {
	if r.P.FDs.IsVirtual(fd) {
		if _, found := r.P.FDs.Get(fd); !found {
			return errno(unix.ENOENT, Emulated)
		}
		return e.fstatVirtual(r, uint64(uint32(fd)), out)
	}
	if res := e.fstatHost(r, fd, out); res.Action != Continue {
		return res
	}
	// A pipe, a socket: its stat as it is; no fd: nothing.
	var st unix.Stat_t
	if fd < 0 || unix.Stat(fdLink(r, fd), &st) != nil {
		return errno(unix.ENOENT, Host)
	}
	hostdev.Stat(&st)
	if err := r.G.Write(out, asBytes(&st)); err != nil {
		return errno(unix.EFAULT, Host)
	}
	return ok(0, Host)
}

// accessFd serves access(2) of /dev/fd/N: the file fd N is, by its guest
// path when it has one, else the host file itself.
func (e *Engine) accessFd(r *Request, fd, mode, flags int) Result {
	if t, en := e.fdTarget(r, int32(fd)); en == 0 {
		return e.accessResolved(r, t, mode, flags)
	} else if en == unix.EBADF {
		return errno(unix.ENOENT, Emulated)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, fdLink(r, fd), uint32(mode), 0); err != nil {
		if err == unix.EBADF {
			err = unix.ENOENT
		}
		return fail(err, Host)
	}
	return ok(0, Host)
}

// LKL's loop devices: the opens (their ioctls are sys_io_ioctl.go's).

// lklDevice reports a device of LKL's that a guest may open
// (loopdev.Device).
func lklDevice(mode uint32, rdev uint64) bool { return loopdev.Device(mode, rdev) }

// openExclBlock retries, for a short while, an O_EXCL open of a loop
// device that LKL found busy: LKL releases a closed file a clock tick
// after the close (sys_file_path.go, releasing), so a program that opens a device
// exclusively right after closing it (mke2fs checks the device with one
// O_EXCL open, then opens it again) would find its own claim still held.
// Anything else stays EBUSY.
func (e *Engine) openExclBlock(r *Request, p string, lflags, flags int) (uintptr, unix.Errno) {
	var st lkl.Stat64
	if lklStatUncached(p, flags&unix.O_NOFOLLOW != 0, &st) != 0 || st.Mode&unix.S_IFMT != unix.S_IFBLK || !lklDevice(st.Mode, st.Rdev) {
		return 0, unix.EBUSY
	}
	var fd uintptr
	le := retryBusy(func() unix.Errno {
		var le unix.Errno
		fd, le = e.lklOpen(r, p, lflags, 0, flags)
		return le
	})
	return fd, le
}

// retryBusy runs op until it is not EBUSY, for at most releaseWait: a
// device that LKL still counts as open a clock tick after the guest's
// last close.
func retryBusy(op func() unix.Errno) unix.Errno {
	deadline := time.Now().Add(releaseWait)
	for {
		le := op()
		if le != unix.EBUSY || time.Now().After(deadline) {
			return le
		}
		time.Sleep(time.Millisecond)
	}
}

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
