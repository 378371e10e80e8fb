package dispatch

import (
	"encoding/binary"
	"runtime"
	"sync"

	"github.com/kbox-project/kbox/inet"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// ioctl(2)'s network-device commands on a socket (SIOCGIFCONF,
// SIOCGIFFLAGS, SIOCGIFHWADDR and the rest of sockios.h, DeviceIoctls):
// answered by LKL, whose network namespace is the guest's. On the host
// they would name the host's devices, addresses and MACs: the pair of an
// internet socket (--net) is a host socket of kbox's, and in the
// in-process tiers every socket of the guest is.

// Sizes of the structures the commands take (the same on x86_64 and
// arm64, and in LKL).
const (
	sizeIfreq  = 40 // struct ifreq
	sizeIfconf = 16 // struct ifconf: int ifc_len, a pointer
	sizeArpreq = 68 // struct arpreq
	// ifconfMax bounds the buffer SIOCGIFCONF fills in LKL (an ifreq per
	// IPv4 address).
	ifconfMax = 64 << 10
)

// devCmd is what kbox knows of one command of the range.
type devCmd struct {
	size int  // the structure it points to (0: not offered, EOPNOTSUPP)
	out  bool // LKL's answer is copied back
	inet bool // an internet socket's only (ENOTTY on others, as on Linux)
}

var (
	getIfreq   = devCmd{size: sizeIfreq, out: true}
	setIfreq   = devCmd{size: sizeIfreq}
	notOffered = devCmd{}
)

// devCmds are the commands served, by what they carry (sockios.h). Not
// offered (size 0): those whose argument points further into the
// caller's memory (routes, ethtool, MII, hardware time stamps, bridges,
// VLANs, DLCI) and the namespace's fd; the device-private and wireless
// ranges are not offered either (deviceIoctl). Any other command of the
// range is ENOTTY, as Linux answers one it does not know.
var devCmds = map[uint32]devCmd{
	unix.SIOCGIFCONF: {size: sizeIfconf, out: true}, // ifconf: its own copy (ifconf)

	unix.SIOCGIFNAME: getIfreq, unix.SIOCGIFFLAGS: getIfreq, unix.SIOCGIFADDR: getIfreq,
	unix.SIOCGIFDSTADDR: getIfreq, unix.SIOCGIFBRDADDR: getIfreq, unix.SIOCGIFNETMASK: getIfreq,
	unix.SIOCGIFMETRIC: getIfreq, unix.SIOCGIFMEM: getIfreq, unix.SIOCGIFMTU: getIfreq,
	unix.SIOCGIFHWADDR: getIfreq, unix.SIOCGIFSLAVE: getIfreq, unix.SIOCGIFINDEX: getIfreq,
	unix.SIOCGIFPFLAGS: getIfreq, unix.SIOCGIFCOUNT: getIfreq, unix.SIOCGIFTXQLEN: getIfreq,
	unix.SIOCGIFMAP: getIfreq,

	unix.SIOCSIFFLAGS: setIfreq, unix.SIOCSIFADDR: setIfreq, unix.SIOCSIFDSTADDR: setIfreq,
	unix.SIOCSIFBRDADDR: setIfreq, unix.SIOCSIFNETMASK: setIfreq, unix.SIOCSIFMETRIC: setIfreq,
	unix.SIOCSIFMEM: setIfreq, unix.SIOCSIFMTU: setIfreq, unix.SIOCSIFNAME: setIfreq,
	unix.SIOCSIFHWADDR: setIfreq, unix.SIOCADDMULTI: setIfreq, unix.SIOCDELMULTI: setIfreq,
	unix.SIOCSIFPFLAGS: setIfreq, unix.SIOCDIFADDR: setIfreq, unix.SIOCSIFHWBROADCAST: setIfreq,
	unix.SIOCSIFTXQLEN: setIfreq, unix.SIOCSIFMAP: setIfreq,

	unix.SIOCGARP: {size: sizeArpreq, out: true, inet: true},
	unix.SIOCSARP: {size: sizeArpreq, inet: true}, unix.SIOCDARP: {size: sizeArpreq, inet: true},

	unix.SIOCADDRT: notOffered, unix.SIOCDELRT: notOffered, unix.SIOCRTMSG: notOffered,
	unix.SIOCETHTOOL: notOffered, unix.SIOCGMIIPHY: notOffered, unix.SIOCGMIIREG: notOffered,
	unix.SIOCSMIIREG: notOffered, unix.SIOCWANDEV: notOffered, unix.SIOCGSKNS: notOffered,
	unix.SIOCSHWTSTAMP: notOffered, unix.SIOCGHWTSTAMP: notOffered,
	unix.SIOCGIFBR: notOffered, unix.SIOCSIFBR: notOffered, unix.SIOCGIFVLAN: notOffered, unix.SIOCSIFVLAN: notOffered,
	unix.SIOCADDDLCI: notOffered, unix.SIOCDELDLCI: notOffered,
}

// deviceCmd reports whether cmd is one of DeviceIoctls' commands.
func deviceCmd(cmd uint32) bool {
	for _, rg := range DeviceIoctls {
		if cmd >= rg[0] && cmd <= rg[1] {
			return true
		}
	}
	return false
}

// deviceIoctl serves ioctl's network-device commands on a host fd that is
// a socket; a host fd that is none gets the host's answer (ENOTTY), not
// served here.
func (e *Engine) deviceIoctl(r *Request) (Result, bool) {
	cmd := uint32(r.Args[1])
	if !deviceCmd(cmd) || r.P == nil {
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
	c, known := devCmds[cmd]
	switch {
	case cmd >= unix.SIOCDEVPRIVATE || known && c.size == 0:
		return errno(unix.EOPNOTSUPP, Emulated), true
	case !known || c.inet && s == nil:
		return errno(unix.ENOTTY, Emulated), true
	}
	lfd := -1
	if s != nil {
		lfd = s.LKLFD()
	} else if lfd, en = devSocket(); en != 0 {
		return errno(en, LKL), true
	}
	if en := useCred(r); en != 0 {
		return errno(en, LKL), true
	}
	if cmd == unix.SIOCGIFCONF {
		return ifconf(r, lfd), true
	}
	b := make([]byte, c.size)
	if r.G.Read(r.Args[2], b) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	v, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), uintptr(cmd), lkl.Ptr(b), 0, 0, 0)
	runtime.KeepAlive(b)
	if le != 0 {
		return errno(le, LKL), true
	}
	if c.out && r.G.Write(r.Args[2], b) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	return ok(int64(v), LKL), true
}

// ifconf serves SIOCGIFCONF: LKL fills a buffer of kbox's (as long as
// the guest's, up to ifconfMax), copied to the guest's; with a null
// buffer, the length needed.
func ifconf(r *Request, lfd int) Result {
	ic := make([]byte, sizeIfconf)
	if r.G.Read(r.Args[2], ic) != nil {
		return errno(unix.EFAULT, LKL)
	}
	n := min(max(int(int32(binary.NativeEndian.Uint32(ic))), 0), ifconfMax)
	guestBuf := binary.NativeEndian.Uint64(ic[8:])
	kc := make([]byte, sizeIfconf)
	binary.NativeEndian.PutUint32(kc, uint32(n))
	var buf []byte
	if guestBuf != 0 {
		buf = make([]byte, max(n, 1)) // a buffer, even of 0 bytes: not the null that asks for the length
		binary.NativeEndian.PutUint64(kc[8:], uint64(lkl.Ptr(buf)))
	}
	_, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), unix.SIOCGIFCONF, lkl.Ptr(kc), 0, 0, 0)
	runtime.KeepAlive(kc)
	runtime.KeepAlive(buf)
	if le != 0 {
		return errno(le, LKL)
	}
	got := int(int32(binary.NativeEndian.Uint32(kc)))
	if guestBuf != 0 && got > 0 && r.G.Write(guestBuf, buf[:min(got, n)]) != nil {
		return errno(unix.EFAULT, LKL)
	}
	binary.NativeEndian.PutUint32(ic, uint32(got))
	if r.G.Write(r.Args[2], ic[:4]) != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// devSocket is an LKL socket of kbox's for the commands asked of a socket
// that has none in LKL (a unix socket, a pair): they name devices, which
// any socket of the namespace reaches. Made once.
var devSock struct {
	mu sync.Mutex
	fd int
	ok bool
}

func devSocket() (int, unix.Errno) {
	devSock.mu.Lock()
	defer devSock.mu.Unlock()
	if devSock.ok {
		return devSock.fd, 0
	}
	fd, le := lkl.Syscall6(lkl.SysSocket, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0, 0, 0, 0)
	if le != 0 {
		return -1, le
	}
	devSock.fd, devSock.ok = int(fd), true
	return devSock.fd, 0
}
