package usernet

import (
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// dialLoopback connects to a host loopback address with a blocking
// connect(2), for the default dialer only. On the host's loopback the
// kernel completes (or refuses) the handshake inside the call, so the
// flow's goroutine does not park in the netpoller and wait to be woken
// for a connection that is already made: that wait was most of the
// 250 µs a guest connection spent in its host dial (docs/networking.md,
// "Connections per second"). SO_SNDTIMEO bounds the call (a full
// backlog drops SYNs) as the default dialer's timeout does.
func dialLoopback(ap netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	addr := net.TCPAddrFromAddrPort(ap)
	fail := func(call string, err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError(call, err)}
	}
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	if a := ap.Addr().Unmap(); a.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fail("socket", err)
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // as net.Dial's
	for {
		err = unix.Connect(fd, sa)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EINPROGRESS || err == unix.EAGAIN {
		err = unix.ETIMEDOUT // SO_SNDTIMEO ended the wait
	}
	if err != nil {
		unix.Close(fd)
		return nil, fail("connect", err)
	}
	f := os.NewFile(uintptr(fd), "dial")
	c, err := net.FileConn(f) // a copy of fd, non-blocking, in the netpoller
	f.Close()
	if err != nil {
		return nil, fail("connect", err)
	}
	return c, nil
}
