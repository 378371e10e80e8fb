package dispatch

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

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
// CPURoute, read-only.

// CPURoute is the host's CPU topology, shown read-only in the guest's /sys
// (so that nproc, lscpu and sysconf(_SC_NPROCESSORS_CONF) see the host's
// CPUs); the rest of the guest's /sys is LKL's.
const CPURoute = "/sys/devices/system/cpu"

// ptsDir is where the guest sees kbox's devpts instance.
const ptsDir = "/dev/pts"

// devpts is kbox's private devpts instance, mounted on first use.
type devpts struct {
	once sync.Once
	bind *Bind  // the instance as a bind of ptsDir; nil without one
	dev  uint64 // the instance's device number
}

// ptsBind returns the devpts instance shown at /dev/pts, mounting it on
// first use, or nil when the guest has no /dev of kbox's or no instance
// could be mounted (one warning says why).
func (e *Engine) ptsBind() *Bind {
	if !e.Opt.Dev {
		return nil
	}
	e.pts.once.Do(func() {
		fd, err := e.Shadows.Devpts()
		if err != nil {
			fmt.Fprintf(os.Stderr, "kbox: warning: no private devpts instance (%v): the guest has no pseudo-terminals (/dev/ptmx fails with ENODEV, /dev/pts is empty)\n", err)
			return
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			fmt.Fprintf(os.Stderr, "kbox: warning: no private devpts instance (%v)\n", err)
			return
		}
		e.pts.bind = &Bind{Host: "devpts", Guest: ptsDir, Root: fd, Ino: st.Ino}
		e.pts.dev = st.Dev
	})
	return e.pts.bind
}

// devTarget returns the Target of guest path abs when it lies in /dev/pts
// and kbox has a devpts instance there.
func (e *Engine) devTarget(abs string) (Target, bool) {
	if !e.Opt.Dev || !(abs == ptsDir || strings.HasPrefix(abs, ptsDir+"/")) {
		return Target{}, false
	}
	b := e.ptsBind()
	if b == nil {
		return Target{}, false // LKL's empty directory
	}
	return bindTarget(b, abs), true
}

// ptsGuestPath maps the /proc fd link of a host fd whose target is link
// to its guest path when the file is in kbox's devpts instance: the
// instance is attached nowhere, so the host names its files "/N".
func (e *Engine) ptsGuestPath(procLink, link string) (string, bool) {
	if e.pts.bind == nil || !strings.HasPrefix(link, "/") {
		return "", false
	}
	var st unix.Stat_t
	if unix.Stat(procLink, &st) != nil || st.Dev != e.pts.dev {
		return "", false
	}
	if link == "/" {
		return ptsDir, true
	}
	return ptsDir + link, true
}

// roRoute refuses a guest open that could change a file of a read-only
// host route (the host's CPU topology: a root guest of a root kbox must
// not take the host's CPUs offline).
func roRoute(t Target, flags int) unix.Errno {
	if t.Bind != nil || t.Route != CPURoute {
		return 0
	}
	if flags&unix.O_ACCMODE != unix.O_RDONLY || flags&(unix.O_CREAT|unix.O_TRUNC) != 0 {
		return unix.EACCES
	}
	return 0
}

// isDevice reports a character or block device's file type.
func isDevice(mode uint32) bool {
	ft := mode & unix.S_IFMT
	return ft == unix.S_IFCHR || ft == unix.S_IFBLK
}

// hostDevs are the host devices a guest's device node may open, by number.
var hostDevs = map[uint64]string{
	unix.Mkdev(1, 3): "/dev/null",
	unix.Mkdev(1, 5): "/dev/zero",
	unix.Mkdev(1, 7): "/dev/full",
	unix.Mkdev(1, 8): "/dev/random",
	unix.Mkdev(1, 9): "/dev/urandom",
}

// Device numbers kbox serves itself.
var (
	devTTY  = unix.Mkdev(5, 0)
	devPtmx = unix.Mkdev(5, 2)
)

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
	case hostDevs[rdev] != "":
		hfd, err = openHostDev(hostDevs[rdev], rdev, hflags)
	case rdev == devTTY:
		hfd, err = e.openCtty(r, hflags)
	case rdev == devPtmx:
		b := e.ptsBind()
		if b == nil {
			return errno(unix.ENODEV, Emulated)
		}
		hfd, err = b.openIn("ptmx", hflags|unix.O_NOFOLLOW, 0)
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
func (e *Engine) openDevice(r *Request, t Target, flags int) (Result, bool) {
	const general = unix.O_PATH | unix.O_EXCL | unix.O_DIRECTORY | unix.O_TMPFILE
	if t.Host || flags&general != 0 || !strings.HasPrefix(t.Path, "/dev/") || strings.HasPrefix(t.Path, "/dev/shm/") {
		return Result{}, false
	}
	var st lkl.Stat64
	if e.lklStat(r, t.LKLPath(), flags&unix.O_NOFOLLOW != 0, &st) != 0 || !isDevice(st.Mode) || lklDevice(st.Mode, st.Rdev) {
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

// openHostDev opens the host's device at path, which must be the
// character device rdev.
func openHostDev(path string, rdev uint64, flags int) (int, error) {
	fd, err := unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != rdev {
		unix.Close(fd)
		return -1, unix.ENXIO
	}
	return fd, nil
}

// openCtty opens the controlling terminal of the calling guest process,
// as /dev/tty does: the terminal whose number is tty_nr in its
// /proc/PID/stat (ENXIO when it has none). The terminal is reopened
// through a file that refers to it: one of the process's own fds, else one
// of kbox's (the terminal kbox was started on), else the pty of that
// number in kbox's devpts instance. A terminal found nowhere: ENXIO.
func (e *Engine) openCtty(r *Request, flags int) (int, error) {
	tty := cttyOf(r.P.Tgid)
	if tty == 0 {
		return -1, unix.ENXIO
	}
	reopen := func(link string) (int, bool) {
		var st unix.Stat_t
		if unix.Stat(link, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != tty {
			return -1, false
		}
		fd, err := unix.Open(link, flags|unix.O_CLOEXEC, 0)
		return fd, err == nil
	}
	dir := "/proc/" + strconv.Itoa(r.P.Tgid) + "/fd/"
	if ents, err := os.ReadDir(dir); err == nil {
		for _, ent := range ents {
			if fd, ok := reopen(dir + ent.Name()); ok {
				return fd, nil
			}
		}
	}
	for fd := 0; fd <= 2; fd++ {
		if hfd, ok := reopen(procFd(fd)); ok {
			return hfd, nil
		}
	}
	if major := unix.Major(tty); major >= 136 && major <= 143 {
		if b := e.ptsBind(); b != nil {
			n := (major-136)<<8 | unix.Minor(tty)
			fd, err := b.openIn(strconv.FormatUint(uint64(n), 10), flags|unix.O_NOFOLLOW, 0)
			if err == nil {
				var st unix.Stat_t
				if unix.Fstat(fd, &st) == nil && st.Rdev == tty {
					return fd, nil
				}
				unix.Close(fd)
			}
		}
	}
	return -1, unix.ENXIO
}

// cttyOf returns the device number of process pid's controlling terminal
// (tty_nr in /proc/PID/stat), 0 when it has none.
func cttyOf(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return ttyNr(string(b))
}

// ttyNr returns tty_nr of a /proc/PID/stat line, 0 if it has none.
func ttyNr(stat string) uint64 {
	// "pid (comm) state ppid pgrp session tty_nr ...": comm may hold
	// spaces and parentheses, the last ")" ends it.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 5 {
		return 0
	}
	n, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return uint64(n)
}

// inPts reports a guest path in kbox's devpts instance.
func (e *Engine) inPts(p string) bool {
	return e.pts.bind != nil && (p == ptsDir || strings.HasPrefix(p, ptsDir+"/"))
}
