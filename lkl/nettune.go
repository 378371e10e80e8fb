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
// (net.ipv4.tcp_mem) is left as the kernel sized it.
const (
	SendBufferMax    = 8 << 20
	ReceiveBufferMax = 8 << 20
)

// tcpWmem and tcpRmem are the values written to net.ipv4.tcp_wmem and
// tcp_rmem: Linux's minimum and default, the maxima above.
func tcpWmem() string { return fmt.Sprintf("4096 16384 %d\n", SendBufferMax) }
func tcpRmem() string { return fmt.Sprintf("4096 131072 %d\n", ReceiveBufferMax) }
