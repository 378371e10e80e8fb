package usernet

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// hostAddress reports whether a is one of the host's own addresses, i.e.
// whether a connection to it would reach the host itself, as one to its
// loopback does (a service bound to 0.0.0.0 or :: answers on every
// address the host has). It asks the host kernel's routing, as a
// connection would: a UDP socket's connect picks a source address and
// sends nothing, and for a destination the host routes to itself Linux
// picks the destination as the source. Checked at each decision, so it
// follows addresses as they come and go. A family the host lacks has no
// address of the host's. When it cannot ask (no socket to spare), it
// says yes: the connection is refused rather than let through
// unchecked.
func hostAddress(a netip.Addr) bool {
	a = a.Unmap()
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: discardPort, Addr: a.As16()}
	if a.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: discardPort, Addr: a.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err == unix.EAFNOSUPPORT {
		return false // no IPv6 here: the dial fails too
	}
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, sa); err != nil {
		return false // no route: not the host, and the dial fails too
	}
	src, err := unix.Getsockname(fd)
	if err != nil {
		return true
	}
	switch s := src.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(s.Addr) == a
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(s.Addr) == a
	}
	return true
}

// discardPort is the port the route lookup names (any would do: nothing
// is sent).
const discardPort = 9
