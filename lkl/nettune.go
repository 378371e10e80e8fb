package lkl

import "fmt"

// SendBufferMax is the largest send buffer LKL's TCP grows a socket's to
// (the third field of net.ipv4.tcp_wmem; Linux's default at LKL's
// memory is about 1 MB). On kbox's link a segment is up to 64 KiB
// (usernet.MTU), so the kernel's own sizing (two congestion windows of
// segments) asks for several MB at once; clamped to 1 MB, a bulk sender
// in the guest waits for acknowledgements with the pipeline half empty
// (docs/networking.md, "Bulk throughput"). LKL's global TCP memory bound
// (net.ipv4.tcp_mem) is left as the kernel sized it.
const SendBufferMax = 8 << 20

// tcpWmem is the value written to net.ipv4.tcp_wmem: Linux's minimum and
// default, SendBufferMax as the maximum.
func tcpWmem() string { return fmt.Sprintf("4096 16384 %d\n", SendBufferMax) }
