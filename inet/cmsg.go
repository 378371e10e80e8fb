package inet

import (
	"encoding/binary"
	"runtime"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Ancillary data of internet datagram sockets (docs/networking.md,
// "Ancillary data").
//
// The guest's setsockopt goes to LKL's socket, so LKL makes the control
// messages the guest asked for (IP_PKTINFO, IP_RECVTOS, IP_RECVTTL,
// SO_TIMESTAMP, SO_TIMESTAMPNS, IPV6_RECVPKTINFO, ...) when it receives
// a datagram. The pump receives each datagram from LKL with recvmsg and
// a control buffer and keeps what LKL gave with the datagram's source
// (dgramSrc.ctrl); a receive kbox serves hands it to the guest
// (recvMsgs.controls). LKL's messages are in Linux's 64-bit layout, the
// guest's. Going the other way, a sendmsg with control data on an
// internet datagram socket (IP_PKTINFO, IP_TOS, IP_TTL, IPV6_PKTINFO,
// ...) is LKL's sendmsg with that data.

// pumpCtrl is the pump's control buffer: room for every message LKL
// makes for a UDP datagram together.
const pumpCtrl = 1024

// lklMsg is a struct msghdr of one iovec for LKL, in heap memory, with
// the buffers it points to; the caller keeps it alive over the call.
type lklMsg struct {
	hdr, iov        []byte
	data, name, ctl []byte
}

func newLKLMsg(data, name, ctl []byte) *lklMsg {
	m := &lklMsg{hdr: make([]byte, sysabi.MsghdrSize), iov: make([]byte, 16), data: data, name: name, ctl: ctl}
	le := binary.NativeEndian
	le.PutUint64(m.iov[0:], uint64(ptrOr0(data)))
	le.PutUint64(m.iov[8:], uint64(len(data)))
	le.PutUint64(m.hdr[0:], uint64(ptrOr0(name)))
	le.PutUint32(m.hdr[8:], uint32(len(name)))
	le.PutUint64(m.hdr[16:], uint64(lkl.Ptr(m.iov)))
	le.PutUint64(m.hdr[24:], 1)
	le.PutUint64(m.hdr[32:], uint64(ptrOr0(ctl)))
	le.PutUint64(m.hdr[40:], uint64(len(ctl)))
	return m
}

// lklRecvmsg is LKL's recvmsg on fd into buf, with the source in name
// and control messages in ctl: the length, the source's length, the
// control data's length, msg_flags.
func lklRecvmsg(fd int, buf, name, ctl []byte, flags int) (int, int, int, int, unix.Errno) {
	m := newLKLMsg(buf, name, ctl)
	n, le := lkl.Syscall6(lkl.SysRecvmsg, uintptr(fd), lkl.Ptr(m.hdr), uintptr(flags), 0, 0, 0)
	runtime.KeepAlive(m)
	if le != 0 {
		return 0, 0, 0, 0, le
	}
	nl := int(binary.NativeEndian.Uint32(m.hdr[8:]))
	cl := int(binary.NativeEndian.Uint64(m.hdr[40:]))
	return int(n), min(nl, len(name)), min(cl, len(ctl)), int(int32(binary.NativeEndian.Uint32(m.hdr[48:]))), 0
}

// lklSendmsg is LKL's sendmsg on fd of data to name (none: the
// connected peer) with control data ctl.
func lklSendmsg(fd int, data, name, ctl []byte, flags int) (int, unix.Errno) {
	m := newLKLMsg(data, name, ctl)
	n, le := lkl.Syscall6(lkl.SysSendmsg, uintptr(fd), lkl.Ptr(m.hdr), uintptr(flags), 0, 0, 0)
	runtime.KeepAlive(m)
	return int(n), le
}

// SendDgram sends one datagram of the guest's sendmsg or sendmmsg on
// internet datagram socket s to LKL at once: to name (none: the
// connected peer), with control data ctl.
func (s *Sock) SendDgram(data, name, ctl []byte, flags int) Result {
	fl := flags | unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL
	var n int
	var le unix.Errno
	if len(ctl) == 0 {
		var v uintptr
		v, le = lkl.Syscall6(lkl.SysSendto, uintptr(s.lfd), ptrOr0(data), uintptr(len(data)), uintptr(fl), ptrOr0(name), uintptr(len(name)))
		n = int(v)
	} else {
		n, le = lklSendmsg(s.lfd, data, name, ctl, fl)
	}
	runtime.KeepAlive(data)
	runtime.KeepAlive(name)
	s.settled()
	if le != 0 {
		return errno(le, LKL)
	}
	return ok(int64(n), LKL)
}
