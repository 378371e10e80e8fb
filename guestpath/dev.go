package guestpath

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/hostproc"
	"golang.org/x/sys/unix"
)

// The guest's /dev (docs/guest-view.md, "/dev and /sys"): what a device
// node opens, by its numbers (DevOpenOf), and kbox's private devpts
// instance at /dev/pts. dispatch/sys_file_dev.go serves the opens with
// these.

// PtsDir is where the guest sees kbox's devpts instance.
const PtsDir = "/dev/pts"

// UnderPts reports a clean guest path at or beneath PtsDir.
func UnderPts(p string) bool { return Under(p, PtsDir) }

// A Mounter mounts a private devpts instance and returns an O_PATH fd of
// its root (shadowfd.Manager.Devpts).
type Mounter interface {
	Devpts() (int, error)
}

// Devpts is kbox's private devpts instance, mounted on first use.
type Devpts struct {
	once sync.Once
	bind *Bind  // the instance as a bind of PtsDir; nil without one
	dev  uint64 // the instance's device number
}

// Bind returns the devpts instance shown at /dev/pts, mounting it with m
// on first use, or nil when no instance could be mounted (one warning
// says why).
func (d *Devpts) Bind(m Mounter) *Bind {
	d.once.Do(func() {
		fd, err := m.Devpts()
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
		d.bind = &Bind{Host: "devpts", Guest: PtsDir, Root: fd, Ino: st.Ino, Shown: hostTerminals(st.Dev)}
		d.dev = st.Dev
	})
	return d.bind
}

// hostTerminals returns, by pty number, kbox's O_PATH fds of the host's
// ptys kbox's stdin, stdout and stderr are (the terminal it runs on),
// but any of the instance (device dev). Shown in the instance under their
// numbers while it has no pty of that number, they are what the guest's
// fd links of its inherited terminal name (/dev/pts/N), so that ttyname
// finds the terminal by that name, as on the host.
func hostTerminals(dev uint64) map[string]int {
	var shown map[string]int
	for fd := 0; fd <= 2; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Dev == dev {
			continue
		}
		major := unix.Major(st.Rdev)
		if major < 136 || major > 143 {
			continue
		}
		name := strconv.FormatUint(uint64((major-136)<<8|unix.Minor(st.Rdev)), 10)
		if _, seen := shown[name]; seen {
			continue
		}
		hfd, err := unix.Open(ProcFd(fd), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if shown == nil {
			shown = map[string]int{}
		}
		shown[name] = hfd
	}
	return shown
}

// Holds reports a guest path in the instance, once it is mounted.
func (d *Devpts) Holds(p string) bool {
	return d.bind != nil && UnderPts(p)
}

// GuestPath maps the /proc fd link of a host fd whose target is link
// to its guest path when the file is in the devpts instance: the
// instance is attached nowhere, so the host names its files "/N".
func (d *Devpts) GuestPath(procLink, link string) (string, bool) {
	if d.bind == nil || !strings.HasPrefix(link, "/") {
		return "", false
	}
	var st unix.Stat_t
	if unix.Stat(procLink, &st) != nil {
		return "", false
	}
	return d.PathOf(st.Dev, link)
}

// PathOf is the guest path of the file the host names link (its fd's
// link text) on device dev, when dev is the instance's: "/N" is
// /dev/pts/N, "/ptmx" /dev/pts/ptmx (what Linux shows in a container whose
// /dev/ptmx leads there).
func (d *Devpts) PathOf(dev uint64, link string) (string, bool) {
	if d.bind == nil || dev != d.dev || !strings.HasPrefix(link, "/") {
		return "", false
	}
	if link == "/" {
		return PtsDir, true
	}
	return PtsDir + link, true
}

// IsDevice reports a character or block device's file type.
func IsDevice(mode uint32) bool {
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

// HostDev returns the host device a guest's device node of number rdev
// opens, "" if none.
func HostDev(rdev uint64) string { return hostDevs[rdev] }

// Device numbers kbox serves itself.
var (
	DevTTY  = unix.Mkdev(5, 0)
	DevPtmx = unix.Mkdev(5, 2)
)

// A DevOpen is what the open of a device node of the image opens.
type DevOpen int

const (
	DevOpensNone DevOpen = iota // nothing: ENXIO, as a kernel without the driver
	DevOpensHost                // the host's own device (HostDev)
	DevOpensCtty                // the caller's controlling terminal (OpenCtty)
	DevOpensPtmx                // the ptmx of kbox's devpts instance
)

// DevOpenOf says what the open of a device node of file type mode and
// number rdev opens, and for DevOpensHost the host device's path: null, zero,
// full, random and urandom are the host's own, tty the caller's
// controlling terminal, ptmx kbox's devpts instance's; every other
// character device, and every block device, nothing (LKL's own drivers
// are never opened for a guest, but for its loop devices: package
// loopdev).
func DevOpenOf(mode uint32, rdev uint64) (DevOpen, string) {
	if mode&unix.S_IFMT != unix.S_IFCHR {
		return DevOpensNone, ""
	}
	switch {
	case hostDevs[rdev] != "":
		return DevOpensHost, hostDevs[rdev]
	case rdev == DevTTY:
		return DevOpensCtty, ""
	case rdev == DevPtmx:
		return DevOpensPtmx, ""
	}
	return DevOpensNone, ""
}

// DevOpenFlags are the flags of kbox's own open of the file a device node
// stands for, from the guest's open flags: what open(2) does to the path
// is done (no O_CREAT, O_EXCL, O_TRUNC, O_DIRECTORY, O_NOFOLLOW), and
// O_NOCTTY: kbox's own opens never give kbox a controlling terminal (a
// guest gets one with TIOCSCTTY, as login_tty does). O_CLOEXEC is the
// guest fd's, not the open's.
func DevOpenFlags(flags int) int {
	return flags&^(unix.O_CLOEXEC|unix.O_CREAT|unix.O_EXCL|unix.O_TRUNC|unix.O_DIRECTORY|unix.O_NOFOLLOW) | unix.O_NOCTTY
}

// InDev reports a clean guest path beneath /dev that may name a device
// node: /dev/shm holds files.
func InDev(p string) bool {
	return strings.HasPrefix(p, "/dev/") && !strings.HasPrefix(p, "/dev/shm/")
}

// OpenHostDev opens the host's device at path, which must be the
// character device rdev.
func OpenHostDev(path string, rdev uint64, flags int) (int, error) {
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

// OpenCtty opens the controlling terminal of guest process tgid, as
// /dev/tty does: the terminal whose number is tty_nr in its /proc/PID/stat
// (ENXIO when it has none). The terminal is reopened through a file that
// refers to it: one of the process's own fds, else one of kbox's (the
// terminal kbox was started on), else the pty of that number in kbox's
// devpts instance (pts, asked only then). A terminal found nowhere: ENXIO.
func OpenCtty(tgid, flags int, pts func() *Bind) (int, error) {
	tty := CttyOf(tgid)
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
	dir := "/proc/" + strconv.Itoa(tgid) + "/fd/"
	if ents, err := os.ReadDir(dir); err == nil {
		for _, ent := range ents {
			if fd, ok := reopen(dir + ent.Name()); ok {
				return fd, nil
			}
		}
	}
	for fd := 0; fd <= 2; fd++ {
		if hfd, ok := reopen(ProcFd(fd)); ok {
			return hfd, nil
		}
	}
	if major := unix.Major(tty); major >= 136 && major <= 143 {
		if b := pts(); b != nil {
			n := (major-136)<<8 | unix.Minor(tty)
			fd, err := b.OpenIn(strconv.FormatUint(uint64(n), 10), flags|unix.O_NOFOLLOW, 0)
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

// CttyOf returns the device number of process pid's controlling terminal
// (tty_nr in /proc/PID/stat), 0 when it has none.
func CttyOf(pid int) uint64 {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return TtyNr(string(b))
}

// TtyNr returns tty_nr of a /proc/PID/stat line, 0 if it has none.
func TtyNr(stat string) uint64 {
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

// MaxFdHops bounds nested /dev/fd/N paths in one call, as the kernel
// bounds symlinks (ELOOP).
const MaxFdHops = 40

// DevFd returns the guest fd named by the clean guest path abs through
// kbox's /dev/fd/N or /dev/std*, and the path beneath it ("" for the fd
// itself); fd -1 is /dev/fd itself.
func DevFd(abs string) (int, string, bool) {
	if !strings.HasPrefix(abs, "/dev/") {
		return 0, "", false
	}
	var s string
	switch name, rest, _ := strings.Cut(abs[len("/dev/"):], "/"); name {
	case "fd":
		if rest == "" {
			return -1, "", true // the directory
		}
		s = rest
	case "stdin":
		s = joinRel("0", rest)
	case "stdout":
		s = joinRel("1", rest)
	case "stderr":
		s = joinRel("2", rest)
	default:
		return 0, "", false
	}
	num, rest, _ := strings.Cut(s, "/")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return 0, "", false // not an fd: LKL says ENOENT
	}
	return n, rest, true
}

func joinRel(a, b string) string {
	if b == "" {
		return a
	}
	return a + "/" + b
}
