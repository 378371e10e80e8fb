package lkl

import (
	"encoding/binary"
	"net/netip"
)

// MaxFrame is the largest ethernet frame the device carries (netdev.c's
// MAX_FRAME): an MTU up to MaxFrame-14.
const MaxFrame = 64 << 10

// inAddr is a as a struct in_addr's s_addr: network byte order in memory.
func inAddr(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}
