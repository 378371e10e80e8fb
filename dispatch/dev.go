package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

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
//     (loopdev.go): devices a root guest makes and backs with its own
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
//
// The pieces that need no request (the numbers, the devpts instance, the
// controlling terminal, the /dev/fd names) are package guestpath's.

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
// permissions, with the caller's credentials): see the top of this file.
// The file kbox opens is installed in the guest as a host fd.
func (e *Engine) devOpen(r *Request, mode uint32, rdev uint64, flags int) Result {
	if mode&unix.S_IFMT != unix.S_IFCHR {
		return errno(unix.ENXIO, Emulated)
	}
	// What open(2) does to the path is done; O_NOCTTY: kbox's own opens
	// never give kbox a controlling terminal (a guest gets one with
	// TIOCSCTTY, as login_tty does).
	hflags := flags&^(unix.O_CLOEXEC|unix.O_CREAT|unix.O_EXCL|unix.O_TRUNC|unix.O_DIRECTORY|unix.O_NOFOLLOW) | unix.O_NOCTTY
	var hfd int
	var err error
	switch {
	case guestpath.HostDev(rdev) != "":
		hfd, err = guestpath.OpenHostDev(guestpath.HostDev(rdev), rdev, hflags)
	case rdev == guestpath.DevTTY:
		hfd, err = e.openCtty(r, hflags)
	case rdev == guestpath.DevPtmx:
		b := e.ptsBind()
		if b == nil {
			return errno(unix.ENODEV, Emulated)
		}
		hfd, err = b.OpenIn("ptmx", hflags|unix.O_NOFOLLOW, 0)
	default:
		return errno(unix.ENXIO, Emulated)
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
// has happened then. /dev/shm holds files: it is left alone.
func (e *Engine) openDevice(r *Request, t guestpath.Target, flags int) (Result, bool) {
	const general = unix.O_PATH | unix.O_EXCL | unix.O_DIRECTORY | unix.O_TMPFILE
	if t.Host || flags&general != 0 || !strings.HasPrefix(t.Path, "/dev/") || strings.HasPrefix(t.Path, "/dev/shm/") {
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
