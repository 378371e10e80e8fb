package dispatch

import (
	"runtime"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/inet"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/loopdev"
	"github.com/kbox-project/kbox/sockios"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// ioctl(2): sysIoctl and the commands kbox serves itself. What is here
// acts on the request (the guest's memory, its fds, LKL's fds for it);
// what is decided without one is the packages':
//   - the inode flags (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS) of image files:
//     LKL's own call on the file's LKL fd (inodeFlagsIoctl);
//   - the network-device commands on a socket (SIOCGIF*, ARP): package
//     sockios's table, struct ifconf and LKL socket decide; deviceIoctl
//     asks LKL, whose network namespace is the guest's;
//   - the commands of LKL's loop devices and loop-control: package
//     loopdev's table and structures decide; lklDevIoctl asks LKL, with
//     the guest fds the commands carry made LKL fds (loopFd).

// sysIoctl serves ioctl(2) on virtual fds.
func sysIoctl(e *Engine, r *Request) Result {
	// ENOTTY, but the listed commands of a loop device or loop-control
	// (lklDevIoctl); on a socket, the network-device commands
	// (deviceIoctl); with --net, an internet socket's FIONREAD and SIOCOUTQ
	// (inet/msg.go).
	if res, served := e.inodeFlagsIoctl(r); served {
		return res
	}
	if !isVirtual(r, r.Args[0]) {
		if res, served := e.inetIoctl(r); served {
			return res
		}
		if res, served := e.deviceIoctl(r); served {
			return res
		}
		return cont
	}
	if _, en := vfd(r, r.Args[0]); en != 0 {
		return errno(en, Emulated)
	}
	if !usableFd(r, r.Args[0]) {
		return errno(unix.EBADF, Emulated) // O_PATH
	}
	if res, served := e.lklDevIoctl(r); served {
		return res // a loop device or loop-control
	}
	return errno(unix.ENOTTY, Emulated)
}

// inodeFlagsIoctl serves FS_IOC_GETFLAGS and FS_IOC_SETFLAGS (lsattr,
// chattr: the immutable and append-only attributes) on the guest's image
// files: on a shadow the flags are its image inode's, not the memfd's (whose
// own would be lost, and would not stop a change by path); on a virtual fd
// its LKL file's. Other fds (pipes, terminals, binds' files) get the host's
// answer. The value is an int, as the kernel reads and writes it.
func (e *Engine) inodeFlagsIoctl(r *Request) (Result, bool) {
	cmd := uint32(r.Args[1])
	if cmd != unix.FS_IOC_GETFLAGS && cmd != unix.FS_IOC_SETFLAGS || r.P == nil {
		return Result{}, false
	}
	var lfd int
	if fd := int(int32(r.Args[0])); isVirtual(r, r.Args[0]) {
		if _, isHost := hostFile(r, r.Args[0]); isHost {
			return Result{}, false
		}
		if ent, open := r.P.FDs.Get(fd); open && ent.File.Listing != nil {
			return Result{}, false // a directory kbox lists: ENOTTY
		}
		var en unix.Errno
		if lfd, en = vfd(r, r.Args[0]); en != 0 {
			return errno(en, Emulated), true
		}
		if !usableFd(r, r.Args[0]) {
			return errno(unix.EBADF, Emulated), true // O_PATH
		}
	} else if n := e.nodeOf(r, fd); n != nil {
		lfd = n.LKLFd()
	} else {
		return Result{}, false
	}
	v := make([]byte, 4)
	if cmd == unix.FS_IOC_SETFLAGS && r.G.Read(r.Args[2], v) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	_, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), uintptr(cmd), uptr(v), 0, 0, 0)
	runtime.KeepAlive(v)
	if le != 0 {
		return errno(le, LKL), true
	}
	if cmd == unix.FS_IOC_GETFLAGS && r.G.Write(r.Args[2], v) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	return ok(0, LKL), true
}

// deviceIoctl serves ioctl's network-device commands (sockios.Ranges) on
// a host fd that is a socket, from LKL: on the host they would name the
// host's devices, addresses and MACs (the pair of an internet socket of
// --net is a host socket of kbox's, and in the in-process tiers every
// socket of the guest is). A host fd that is no socket gets the host's
// answer (ENOTTY), not served here.
func (e *Engine) deviceIoctl(r *Request) (Result, bool) {
	cmd := uint32(r.Args[1])
	if !sockios.InRange(cmd) || r.P == nil {
		return Result{}, false
	}
	ino, isSock, en := sockInode(r, r.Args[0])
	if en != 0 {
		return errno(en, Emulated), true
	}
	if !isSock {
		return Result{}, false
	}
	var s *inet.Sock
	if e.Net != nil {
		s = e.Net.Lookup(ino)
	}
	c, en := sockios.Lookup(cmd, s != nil)
	if en != 0 {
		return errno(en, Emulated), true
	}
	lfd := -1
	if s != nil {
		lfd = s.LKLFD()
	} else if lfd, en = sockios.Socket(); en != 0 {
		return errno(en, LKL), true
	}
	if en := useCred(r); en != 0 {
		return errno(en, LKL), true
	}
	if cmd == unix.SIOCGIFCONF {
		return ifconf(r, lfd), true
	}
	b := make([]byte, c.Size)
	if r.G.Read(r.Args[2], b) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	v, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), uintptr(cmd), lkl.Ptr(b), 0, 0, 0)
	runtime.KeepAlive(b)
	if le != 0 {
		return errno(le, LKL), true
	}
	if c.Out && r.G.Write(r.Args[2], b) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	return ok(int64(v), LKL), true
}

// ifconf serves SIOCGIFCONF: LKL fills a buffer of kbox's (as long as
// the guest's, up to sockios.IfconfMax), copied to the guest's; with a
// null buffer, the length needed.
func ifconf(r *Request, lfd int) Result {
	ic := make([]byte, sockios.SizeIfconf)
	if r.G.Read(r.Args[2], ic) != nil {
		return errno(unix.EFAULT, LKL)
	}
	n, guestBuf := sockios.ReadIfconf(ic)
	kc := make([]byte, sockios.SizeIfconf)
	var buf []byte
	var kbuf uint64
	if guestBuf != 0 {
		buf = make([]byte, max(n, 1)) // a buffer, even of 0 bytes: not the null that asks for the length
		kbuf = uint64(lkl.Ptr(buf))
	}
	sockios.PutIfconf(kc, n, kbuf)
	_, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), unix.SIOCGIFCONF, lkl.Ptr(kc), 0, 0, 0)
	runtime.KeepAlive(kc)
	runtime.KeepAlive(buf)
	if le != 0 {
		return errno(le, LKL)
	}
	got := sockios.IfconfLen(kc)
	if guestBuf != 0 && got > 0 && r.G.Write(guestBuf, buf[:min(got, n)]) != nil {
		return errno(unix.EFAULT, LKL)
	}
	sockios.PutIfconf(ic, got, guestBuf)
	if r.G.Write(r.Args[2], ic[:4]) != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// LKL's loop devices and loop-control.

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
		if backing, en = e.loopFd(r, loopdev.ConfigFd(buf)); en != 0 {
			return errno(en, Emulated), true
		}
		loopdev.SetConfigFd(buf, backing)
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
	switch {
	case loopdev.Binds(cmd):
		if dev, bound := loopdev.Backing(lfd); bound {
			e.Shadows.Release(dev)
		}
	case cmd == loopdev.CtlAdd || cmd == loopdev.CtlGetFree:
		e.loopNode(int(v), true)
	case cmd == loopdev.CtlRemove:
		e.loopNode(int(r.Args[2]), false)
	}
	return ok(int64(v), LKL), true
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
	b, err := hostproc.Read("/proc/" + strconv.Itoa(tgid) + "/fdinfo/" + strconv.Itoa(fd))
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
	p, rdev, valid := loopdev.Node(n)
	if !e.Opt.Dev || !valid {
		return
	}
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
