package dispatch

import (
	"encoding/binary"
	"runtime"
	"sync"

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

// The commands served, by what they carry (sockios.h).
var (
	// An ifreq, read back to the guest.
	ifreqGet = map[uint32]bool{
		unix.SIOCGIFNAME: true, unix.SIOCGIFFLAGS: true, unix.SIOCGIFADDR: true,
		unix.SIOCGIFDSTADDR: true, unix.SIOCGIFBRDADDR: true, unix.SIOCGIFNETMASK: true,
		unix.SIOCGIFMETRIC: true, unix.SIOCGIFMEM: true, unix.SIOCGIFMTU: true,
		unix.SIOCGIFHWADDR: true, unix.SIOCGIFSLAVE: true, unix.SIOCGIFINDEX: true,
		unix.SIOCGIFPFLAGS: true, unix.SIOCGIFCOUNT: true, unix.SIOCGIFTXQLEN: true,
		unix.SIOCGIFMAP: true,
	}
	// An ifreq, only read.
	ifreqSet = map[uint32]bool{
		unix.SIOCSIFFLAGS: true, unix.SIOCSIFADDR: true, unix.SIOCSIFDSTADDR: true,
		unix.SIOCSIFBRDADDR: true, unix.SIOCSIFNETMASK: true, unix.SIOCSIFMETRIC: true,
		unix.SIOCSIFMEM: true, unix.SIOCSIFMTU: true, unix.SIOCSIFNAME: true,
		unix.SIOCSIFHWADDR: true, unix.SIOCADDMULTI: true, unix.SIOCDELMULTI: true,
		unix.SIOCSIFPFLAGS: true, unix.SIOCDIFADDR: true, unix.SIOCSIFHWBROADCAST: true,
		unix.SIOCSIFTXQLEN: true, unix.SIOCSIFMAP: true,
	}
	// An arpreq, internet sockets only (true: read back).
	arpreqCmds = map[uint32]bool{unix.SIOCGARP: true, unix.SIOCSARP: false, unix.SIOCDARP: false}
	// Commands whose argument points further into the caller's memory
	// (ethtool, MII, hardware time stamps, bonding, bridges, VLANs,
	// routes, the device-private range), and the wireless ones: LKL's
	// device has none of them to offer.
	unsupportedCmds = map[uint32]bool{
		unix.SIOCADDRT: true, unix.SIOCDELRT: true, unix.SIOCRTMSG: true,
		unix.SIOCETHTOOL: true, unix.SIOCGMIIPHY: true, unix.SIOCGMIIREG: true,
		unix.SIOCSMIIREG: true, unix.SIOCWANDEV: true, unix.SIOCGSKNS: true,
		unix.SIOCSHWTSTAMP: true, unix.SIOCGHWTSTAMP: true,
		unix.SIOCGIFBR: true, unix.SIOCSIFBR: true, unix.SIOCGIFVLAN: true, unix.SIOCSIFVLAN: true,
		unix.SIOCADDDLCI: true, unix.SIOCDELDLCI: true,
	}
)

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
	hfd, err := r.P.getfd(int(int32(r.Args[0])))
	if err != nil {
		return errno(unix.EBADF, Emulated), true
	}
	var st unix.Stat_t
	serr := unix.Fstat(hfd, &st)
	unix.Close(hfd)
	if serr != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return Result{}, false
	}
	var s *inetSock
	if e.Net != nil {
		s = e.Net.lookup(st.Ino)
	}
	_, arp := arpreqCmds[cmd]
	switch {
	case unsupportedCmds[cmd], cmd >= unix.SIOCDEVPRIVATE:
		return errno(unix.EOPNOTSUPP, Emulated), true
	case arp && s == nil:
		return errno(unix.ENOTTY, Emulated), true // ARP is an internet socket's
	case !arp && !ifreqGet[cmd] && !ifreqSet[cmd] && cmd != unix.SIOCGIFCONF:
		return errno(unix.ENOTTY, Emulated), true // as Linux's for a command it does not know
	}
	lfd := -1
	if s != nil {
		lfd = s.lfd
	} else {
		var en unix.Errno
		if lfd, en = devSocket(); en != 0 {
			return errno(en, LKL), true
		}
	}
	if en := useCred(r); en != 0 {
		return errno(en, LKL), true
	}
	if cmd == unix.SIOCGIFCONF {
		return ifconf(r, lfd), true
	}
	size, back := sizeIfreq, ifreqGet[cmd]
	if arp {
		size, back = sizeArpreq, arpreqCmds[cmd]
	}
	b := make([]byte, size)
	if r.G.Read(r.Args[2], b) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	v, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), uintptr(cmd), lkl.Ptr(b), 0, 0, 0)
	runtime.KeepAlive(b)
	if le != 0 {
		return errno(le, LKL), true
	}
	if back && r.G.Write(r.Args[2], b) != nil {
		return errno(unix.EFAULT, LKL), true
	}
	return ok(int64(v), LKL), true
}

// ifconf serves SIOCGIFCONF: LKL fills a buffer of kbox's, copied to the
// guest's; with a null buffer, the length needed.
func ifconf(r *Request, lfd int) Result {
	ic := make([]byte, sizeIfconf)
	if r.G.Read(r.Args[2], ic) != nil {
		return errno(unix.EFAULT, LKL)
	}
	n := int(int32(binary.NativeEndian.Uint32(ic)))
	guestBuf := binary.NativeEndian.Uint64(ic[8:])
	var buf []byte
	if guestBuf != 0 {
		buf = make([]byte, min(max(n, 0), ifconfMax))
		if len(buf) == 0 {
			buf = nil
		}
	}
	kc := make([]byte, sizeIfconf)
	binary.NativeEndian.PutUint32(kc, uint32(len(buf)))
	if guestBuf != 0 && len(buf) > 0 {
		binary.NativeEndian.PutUint64(kc[8:], uint64(lkl.Ptr(buf)))
	}
	_, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), unix.SIOCGIFCONF, lkl.Ptr(kc), 0, 0, 0)
	runtime.KeepAlive(kc)
	runtime.KeepAlive(buf)
	if le != 0 {
		return errno(le, LKL)
	}
	got := int(int32(binary.NativeEndian.Uint32(kc)))
	if guestBuf != 0 && got > 0 {
		if r.G.Write(guestBuf, buf[:min(got, len(buf))]) != nil {
			return errno(unix.EFAULT, LKL)
		}
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
