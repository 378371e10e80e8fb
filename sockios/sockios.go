// Package sockios knows ioctl(2)'s network-device commands on a socket
// (linux/sockios.h: SIOCGIFCONF, SIOCGIFFLAGS, SIOCGIFHWADDR, the ARP
// commands and the rest of the range): which commands kbox serves, the
// size of the structure each points to and whether the answer is copied
// back, the errno of the others, struct ifconf, and the LKL socket the
// commands go to when the guest's socket has none in LKL.
//
// Package dispatch serves the commands (dispatch/sys_io_ioctl.go): on a
// host socket they would name the host's devices, addresses and MACs, so
// they are answered by LKL, whose network namespace is the guest's
// (docs/networking.md, "Devices through ioctl").
package sockios

import (
	"encoding/binary"
	"sync"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Ranges are the ranges of ioctl commands on sockets kbox answers from
// LKL: sockios.h's commands on routes, network devices and ARP entries
// (0x890B-0x89FF) and the wireless ones (0x8B00-0x8BFF).
var Ranges = [][2]uint32{{0x890B, 0x89FF}, {0x8B00, 0x8BFF}}

// InRange reports whether cmd is in one of Ranges.
func InRange(cmd uint32) bool {
	for _, rg := range Ranges {
		if cmd >= rg[0] && cmd <= rg[1] {
			return true
		}
	}
	return false
}

// Sizes of the structures the commands take (the same on x86_64 and
// arm64, and in LKL).
const (
	sizeIfreq  = 40 // struct ifreq
	SizeIfconf = 16 // struct ifconf: int ifc_len, a pointer
	sizeArpreq = 68 // struct arpreq
	// IfconfMax bounds the buffer SIOCGIFCONF fills in LKL (an ifreq per
	// IPv4 address).
	IfconfMax = 64 << 10
)

// Cmd is what kbox knows of one command of the range.
type Cmd struct {
	Size int  // the structure it points to (0: not offered, EOPNOTSUPP)
	Out  bool // LKL's answer is copied back
	Inet bool // an internet socket's only (ENOTTY on others, as on Linux)
}

var (
	getIfreq   = Cmd{Size: sizeIfreq, Out: true}
	setIfreq   = Cmd{Size: sizeIfreq}
	notOffered = Cmd{}
)

// cmds are the commands served, by what they carry (sockios.h). Not
// offered (Size 0): those whose argument points further into the
// caller's memory (routes, ethtool, MII, hardware time stamps, bridges,
// VLANs, DLCI) and the namespace's fd; the device-private and wireless
// ranges are not offered either (Lookup). Any other command of the range
// is ENOTTY, as Linux answers one it does not know.
var cmds = map[uint32]Cmd{
	unix.SIOCGIFCONF: {Size: SizeIfconf, Out: true}, // ifconf: its own copy (dispatch's ifconf)

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

	unix.SIOCGARP: {Size: sizeArpreq, Out: true, Inet: true},
	unix.SIOCSARP: {Size: sizeArpreq, Inet: true}, unix.SIOCDARP: {Size: sizeArpreq, Inet: true},

	unix.SIOCADDRT: notOffered, unix.SIOCDELRT: notOffered, unix.SIOCRTMSG: notOffered,
	unix.SIOCETHTOOL: notOffered, unix.SIOCGMIIPHY: notOffered, unix.SIOCGMIIREG: notOffered,
	unix.SIOCSMIIREG: notOffered, unix.SIOCWANDEV: notOffered, unix.SIOCGSKNS: notOffered,
	unix.SIOCSHWTSTAMP: notOffered, unix.SIOCGHWTSTAMP: notOffered,
	unix.SIOCGIFBR: notOffered, unix.SIOCSIFBR: notOffered, unix.SIOCGIFVLAN: notOffered, unix.SIOCSIFVLAN: notOffered,
	unix.SIOCADDDLCI: notOffered, unix.SIOCDELDLCI: notOffered,
}

// Lookup returns what kbox knows of command cmd of the range on a socket
// (inet: an internet socket of the guest's, one with its own socket in
// LKL), or the errno the guest gets: EOPNOTSUPP for a command not offered
// (and the device-private and wireless ranges), ENOTTY for one Linux does
// not know or, on a socket that is not an internet one, an internet
// socket's command.
func Lookup(cmd uint32, inet bool) (Cmd, unix.Errno) {
	c, known := cmds[cmd]
	switch {
	case cmd >= unix.SIOCDEVPRIVATE || known && c.Size == 0:
		return Cmd{}, unix.EOPNOTSUPP
	case !known || c.Inet && !inet:
		return Cmd{}, unix.ENOTTY
	}
	return c, 0
}

// ReadIfconf reads the guest's struct ifconf ic (SizeIfconf bytes): the
// length of its buffer, bounded to [0, IfconfMax], and the buffer's
// address (0: the caller asks for the length needed).
func ReadIfconf(ic []byte) (n int, buf uint64) {
	n = min(max(int(int32(binary.NativeEndian.Uint32(ic))), 0), IfconfMax)
	return n, binary.NativeEndian.Uint64(ic[8:])
}

// PutIfconf writes into ic (SizeIfconf bytes) the length n and the
// buffer address buf.
func PutIfconf(ic []byte, n int, buf uint64) {
	binary.NativeEndian.PutUint32(ic, uint32(n))
	binary.NativeEndian.PutUint64(ic[8:], buf)
}

// IfconfLen is the length in struct ifconf ic.
func IfconfLen(ic []byte) int { return int(int32(binary.NativeEndian.Uint32(ic))) }

// Socket is an LKL socket of kbox's for the commands asked of a socket
// that has none in LKL (a unix socket, a pair): they name devices, which
// any socket of the namespace reaches. Made once.
func Socket() (int, unix.Errno) {
	sock.mu.Lock()
	defer sock.mu.Unlock()
	if sock.ok {
		return sock.fd, 0
	}
	fd, le := lkl.Syscall6(lkl.SysSocket, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0, 0, 0, 0)
	if le != 0 {
		return -1, le
	}
	sock.fd, sock.ok = int(fd), true
	return sock.fd, 0
}

var sock struct {
	mu sync.Mutex
	fd int
	ok bool
}
