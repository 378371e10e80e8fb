package dispatch

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/loopdev"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Loop devices of LKL's, as the guest opens, configures and mounts them:
// the glue that needs the engine (the request's fds, the guest's memory,
// the shadows, /dev). Package loopdev knows the devices, their ioctl
// commands and structures (its package comment says what a guest may do
// with them).

// lklDevice reports a device of LKL's that a guest may open
// (loopdev.Device).
func lklDevice(mode uint32, rdev uint64) bool { return loopdev.Device(mode, rdev) }

// lklDevIoctl serves ioctl(2) on a virtual fd of one of LKL's devices;
// served is false for any other virtual fd.
func (e *Engine) lklDevIoctl(r *Request) (Result, bool) {
	lfd, en := vfd(r, r.Args[0])
	if en != 0 {
		return Result{}, false
	}
	st, err := lkl.Fstat(lfd)
	if err != nil || !lklDevice(st.Mode, st.Rdev) {
		return Result{}, false
	}
	cmd := uint32(r.Args[1])
	c, en := loopdev.Lookup(cmd, st.Mode&unix.S_IFMT == unix.S_IFCHR)
	if en != 0 {
		return errno(en, Emulated), true
	}
	arg := uintptr(r.Args[2])
	if (cmd == loopdev.GetStatus || cmd == loopdev.GetStatus64) && arg == 0 {
		return errno(unix.EINVAL, Emulated), true // as the driver checks first
	}
	lcmd := loopdev.LKLCmd(cmd) // the command LKL gets
	var buf []byte
	switch {
	case c.In > 0:
		buf = make([]byte, c.In)
		if r.G.Read(r.Args[2], buf) != nil {
			return errno(unix.EFAULT, Emulated), true
		}
		if c.Old {
			buf = loopdev.FromOld(buf)
		}
	case c.Out > 0:
		buf = make([]byte, c.Out)
	}
	// The guest fds these commands carry become LKL fds, held until LKL
	// has taken its own reference.
	var backing int = -1
	switch {
	case c.Fd:
		if backing, en = e.loopFd(r, int32(r.Args[2])); en != 0 {
			return errno(en, Emulated), true
		}
		arg = uintptr(backing)
	case cmd == loopdev.Configure:
		gfd := int32(uint32(buf[0]) | uint32(buf[1])<<8 | uint32(buf[2])<<16 | uint32(buf[3])<<24)
		if backing, en = e.loopFd(r, gfd); en != 0 {
			return errno(en, Emulated), true
		}
		buf[0], buf[1], buf[2], buf[3] = byte(backing), byte(backing>>8), byte(backing>>16), byte(backing>>24)
	}
	if backing >= 0 {
		defer lkl.Close(backing)
	}
	if buf != nil {
		arg = uptr(buf)
	}
	if en := useCred(r); en != 0 {
		return errno(en, LKL), true
	}
	oldDev, hadOld := uint64(0), false
	if cmd == loopdev.ClrFd || cmd == loopdev.ChangeFd {
		oldDev, hadOld = loopdev.Backing(lfd)
	}
	var v uintptr
	call := func() unix.Errno {
		var le unix.Errno
		v, le = lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), uintptr(lcmd), arg, 0, 0, 0)
		return le
	}
	var le unix.Errno
	if cmd == loopdev.CtlRemove {
		le = retryBusy(call) // the guest's last close of the device may be pending in LKL
	} else {
		le = call()
	}
	runtime.KeepAlive(buf)
	if le != 0 {
		return errno(le, LKL), true
	}
	if c.Out > 0 {
		out := buf
		if c.Old {
			var en unix.Errno
			if out, en = loopdev.ToOld(buf); en != 0 {
				return errno(en, Emulated), true
			}
		}
		if r.G.Write(r.Args[2], out) != nil {
			return errno(unix.EFAULT, LKL), true
		}
	}
	// The device now reads and writes its file in LKL, behind any shadow
	// of it: the shadows of that filesystem no guest holds go (written
	// back first), so that the next open reads what LKL has. A guest
	// holding the file open meanwhile keeps its own view (docs/security.md).
	if cmd == loopdev.ClrFd {
		loopdev.AwaitClear(lfd, releaseWait)
	}
	if hadOld {
		e.Shadows.Release(oldDev)
	}
	switch cmd {
	case loopdev.SetFd, loopdev.Configure, loopdev.ChangeFd:
		if dev, bound := loopdev.Backing(lfd); bound {
			e.Shadows.Release(dev)
		}
	case loopdev.CtlAdd, loopdev.CtlGetFree:
		e.loopNode(int(v), true)
	case loopdev.CtlRemove:
		e.loopNode(int(r.Args[2]), false)
	}
	return ok(int64(v), LKL), true
}

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

// loopFd returns a new LKL fd of the file behind guest fd gfd, for a loop
// device to be backed by: the LKL file of a virtual fd, or the image file
// a shadow stands for (written back first, so that LKL holds what the
// guest wrote), opened with the guest fd's access mode. Anything else (a
// host file: a bind's, a pipe, a socket, a terminal) is EBADF: the host's
// files never back a device of LKL's.
func (e *Engine) loopFd(r *Request, gfd int32) (int, unix.Errno) {
	fd := uint64(uint32(gfd))
	if isVirtual(r, fd) {
		if hfd, isHost := hostFile(r, fd); isHost {
			if n := e.nodeOf(r, int(gfd)); n != nil {
				fl, err := unix.FcntlInt(uintptr(hfd), unix.F_GETFL, 0)
				if err != nil {
					return -1, unix.EBADF
				}
				return e.reopenNode(n.LKLFd(), fl, func() error { return e.Shadows.Sync(n) })
			}
			return -1, unix.EBADF
		}
		lfd, en := vfd(r, fd)
		if en != 0 {
			return -1, en
		}
		if !usableFd(r, fd) {
			return -1, unix.EBADF // O_PATH, as fget refuses it
		}
		return dupLKL(lfd)
	}
	if gfd < 0 {
		return -1, unix.EBADF
	}
	n := e.nodeOf(r, int(gfd))
	if n == nil {
		return -1, unix.EBADF
	}
	fl, ok := guestFdFlags(r.P.Tgid, int(gfd))
	if !ok {
		return -1, unix.EBADF
	}
	return e.reopenNode(n.LKLFd(), fl, func() error { return e.Shadows.Sync(n) })
}

// reopenNode writes a shadow node back (sync) and opens its LKL inode
// again, through the kernel's proc, with the access mode of flags.
func (e *Engine) reopenNode(lfd, flags int, sync func() error) (int, unix.Errno) {
	if lfd < 0 {
		return -1, unix.EBADF
	}
	if err := sync(); err != nil {
		return -1, sysabi.Errno(err)
	}
	lflags := int(lkl.OpenFlagsToLKL(uint32(flags&unix.O_ACCMODE))) | unix.O_CLOEXEC
	var nfd uintptr
	var le unix.Errno
	asRoot(func() {
		nfd, le = e.kprocPath(lkl.SysOpenat, 1, "self/fd/"+strconv.Itoa(lfd), [6]uintptr{0, 0, uintptr(lflags)})
	})
	if le != 0 {
		return -1, le
	}
	return int(nfd), 0
}

// dupLKL returns a new LKL fd of LKL's open file lfd.
func dupLKL(lfd int) (int, unix.Errno) {
	nfd, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lfd), unix.F_DUPFD_CLOEXEC, 0, 0, 0, 0)
	if le != 0 {
		return -1, le
	}
	return int(nfd), 0
}

// guestFdFlags returns the status flags of host fd fd of guest process
// tgid (its /proc fdinfo).
func guestFdFlags(tgid, fd int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tgid) + "/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, found := strings.Cut(l, ":"); found && k == "flags" {
			fl, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return int(fl), err == nil
		}
	}
	return 0, false
}

// loopNode makes (add) or removes the guest's /dev/loopN when LKL made or
// removed loop device n, as devtmpfs does on Linux (mode 0600, root's),
// when the guest's /dev is kbox's. A node the guest put there itself is
// left alone unless it is that very device.
func (e *Engine) loopNode(n int, add bool) {
	if !e.Opt.Dev || n < 0 || n >= 1<<20 {
		return
	}
	p := "/dev/loop" + strconv.Itoa(n)
	rdev := unix.Mkdev(loopdev.Major, uint32(n))
	asRoot(func() {
		st, err := lkl.Stat(p, true)
		switch {
		case add && err != nil:
			lkl.Mknod(p, unix.S_IFBLK|0o600, rdev)
		case !add && err == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == rdev:
			lkl.Unlink(p, false)
		}
	})
	e.stats.Changed()
}

// mountSource returns the source of a guest's mount(2) as LKL must see
// it: a guest path naming a block device becomes the device's LKL path,
// refused (ENXIO) unless it is a loop device; anything else (a
// filesystem's name, "none", a path LKL does not have, the source of a
// bind, move or remount) goes as it is. blk says the source is a block device: the caller checks what was
// mounted (loopMounted).
func (e *Engine) mountSource(r *Request, src string, flags uintptr) (lsrc string, blk bool, en unix.Errno) {
	if src == "" || !strings.ContainsRune(src, '/') || flags&(unix.MS_BIND|unix.MS_MOVE|unix.MS_REMOUNT) != 0 {
		return src, false, 0
	}
	t, en := e.resolveAt(r, unix.AT_FDCWD, src)
	if en != 0 || t.Host || t.Proc != nil || t.Fd > 0 {
		return src, false, 0
	}
	var st lkl.Stat64
	if lklStatUncached(t.LKLPath(), false, &st) != 0 || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return src, false, 0
	}
	if !lklDevice(st.Mode, st.Rdev) {
		return "", true, unix.ENXIO
	}
	return t.LKLPath(), true, 0
}

// loopMounted checks that a new mount at LKL path p of a block device
// source is a loop device's filesystem: the guest may have put another
// device's node at the source's path since mountSource looked. If not, it
// is detached at once and the mount fails with ENXIO.
func loopMounted(p string) unix.Errno {
	var st lkl.Stat64
	if lklStatUncached(p, false, &st) == 0 && unix.Major(st.Dev) == loopdev.Major {
		return 0
	}
	lklPath(lkl.SysUmount2, 0, p, [6]uintptr{0, unix.MNT_DETACH})
	return unix.ENXIO
}
