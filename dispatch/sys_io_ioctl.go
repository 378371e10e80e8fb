package dispatch

import (
	"runtime"

	"github.com/kbox-project/kbox/inet"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sockios"
	"golang.org/x/sys/unix"
)

// ioctl(2): sysIoctl and the commands kbox serves itself, acting on the
// request (the guest's memory, its fds, LKL's fds for it). What is decided
// without a request is the packages':
//   - the inode flags (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS) of image files:
//     LKL's, here;
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
