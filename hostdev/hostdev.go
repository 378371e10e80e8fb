// Package hostdev gives the device numbers the guest sees of the host's
// files: a bind's, a host route's, a host fd's.
package hostdev

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The guest's own files are LKL's, with LKL's device numbers (the image's
// disk is 254:0, its tmpfs and sysfs anonymous 0:N). A bind's files, a
// host route's (/proc) and the host fds a guest holds are the host's, on
// the host's devices, which are numbered from the same small ranges: a
// host on a virtio disk has /dev/vda at 254:0 too. Shown as they are, a
// bind's file and an image file could share a device and an inode number
// and be taken for one file (find -samefile, cp -a and tar's hard-link
// detection, rsync, du), and a bind could look like the image's own
// filesystem (find -xdev, df).
//
// So every device number of a host file that reaches the guest (stat,
// statx, /proc/PID/mountinfo, maps) has bit 11 of its major flipped: LKL
// never numbers a device at major 2048 or above, and hosts do not either,
// so the host's devices land where the guest's kernel has none, each on
// its own number (a flip is one to one), the same in every view and every
// run. Objects of the host kernel's internal filesystems, which a guest's
// own kernel would have too and which are never mounted (pipes, sockets,
// memfds, eventfds and the like, pidfds), keep their numbers, as maps
// shows them (a memfd at 00:01): no path leads to them, and the tools that
// compare files by device and inode never meet them.

// hostMajorFlip is the bit of a host device's major that the guest sees
// flipped.
const hostMajorFlip = 0x800

// internalDevs are the devices of the host kernel's internal filesystems,
// found once by making an object of each: a memfd (shmem's internal
// mount), a pipe (pipefs), a socket (sockfs), an eventfd (the anonymous
// inodes') and a pidfd (pidfs on Linux 6.9 and later). One that could not
// be made is ^0, which is no device.
var internalDevs = sync.OnceValue(func() (devs [5]uint64) {
	for i := range devs {
		devs[i] = ^uint64(0)
	}
	note := func(i int, fds ...int) {
		var st unix.Stat_t
		if len(fds) > 0 && fds[0] >= 0 && unix.Fstat(fds[0], &st) == nil {
			devs[i] = st.Dev
		}
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}
	fd, _ := unix.MemfdCreate("kbox-dev", unix.MFD_CLOEXEC)
	note(0, fd)
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC) == nil {
		note(1, p[0], p[1])
	}
	if s, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
		note(2, s[0], s[1])
	}
	fd, _ = unix.Eventfd(0, unix.EFD_CLOEXEC)
	note(3, fd)
	fd, _ = unix.PidfdOpen(unix.Getpid(), 0)
	note(4, fd)
	return devs
})

// Shown is the device number the guest sees for host device dev.
func Shown(dev uint64) uint64 {
	if Internal(dev) {
		return dev
	}
	return unix.Mkdev(unix.Major(dev)^hostMajorFlip, unix.Minor(dev))
}

// Internal reports whether dev is a device of the host kernel's internal
// filesystems, which the guest sees as it is.
func Internal(dev uint64) bool {
	for _, d := range internalDevs() {
		if d == dev {
			return true
		}
	}
	return false
}

// Stat gives a host file's stat the device number the guest sees.
func Stat(st *unix.Stat_t) { st.Dev = Shown(st.Dev) }

// Statx gives a host file's statx the device number the guest sees.
func Statx(sx *unix.Statx_t) {
	d := Shown(unix.Mkdev(sx.Dev_major, sx.Dev_minor))
	sx.Dev_major, sx.Dev_minor = unix.Major(d), unix.Minor(d)
}
