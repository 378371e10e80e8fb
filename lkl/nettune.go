package lkl

import "fmt"

// SendBufferMax and ReceiveBufferMax are the largest send and receive
// buffers LKL's TCP grows a socket's to (the third field of
// net.ipv4.tcp_wmem and tcp_rmem; Linux's default at LKL's memory is
// about 1 MB). On kbox's link a segment is up to 64 KiB (usernet.MTU),
// so the kernel's own sizing (two congestion windows of segments to
// send; on receipt, a window that grows with what the reader takes per
// round trip) asks for several MB at once; clamped to 1 MB, a bulk transfer waits for
// acknowledgements or window updates with the pipeline half empty
// (docs/networking.md, "Bulk throughput"). LKL's global TCP memory bound
// (net.ipv4.tcp_mem) grows with them (tcpMem).
const (
	SendBufferMax    = 8 << 20
	ReceiveBufferMax = 8 << 20
)

// tcpWmem and tcpRmem are the values written to net.ipv4.tcp_wmem and
// tcp_rmem: Linux's minimum and default, the maxima above.
func tcpWmem() string { return fmt.Sprintf("4096 16384 %d\n", SendBufferMax) }
func tcpRmem() string { return fmt.Sprintf("4096 131072 %d\n", ReceiveBufferMax) }

// tcpMem is the value written to net.ipv4.tcp_mem for a kernel of memMB
// MiB: in 4 KiB pages, 1/8, 3/16 and 1/4 of its memory (16, 24 and 32 MiB
// at --net's 128 MiB). The kernel sizes it from its free memory at boot,
// about 5.8, 7.7 and 11.6 MiB at 128 MiB: less than one connection's
// buffers at the maxima above, so that one guest-to-guest connection
// whose reader paused (8 MiB queued at the receiver, more at the sender)
// put LKL's TCP under memory pressure, which drops arriving segments; the
// sender then waits for its retransmission timer, doubled at each try
// while the reader is still away, and after the reader returns the
// connection stood still for seconds (docs/networking.md, "Bulk
// throughput").
func tcpMem(memMB int) string {
	pages := memMB << 20 / 4096
	return fmt.Sprintf("%d %d %d\n", pages/8, pages*3/16, pages/4)
}

// pingGroups is net.ipv4.ping_group_range: every group. Linux's default,
// "1 0", names none: an unprivileged ping's ICMP datagram socket is then
// EACCES, and it wants a raw socket, which kbox does not carry.
const pingGroups = "0 2147483647\n"
