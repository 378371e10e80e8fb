package lkl

import (
	"encoding/binary"
	"net/netip"
)

// inAddr is a as a struct in_addr's s_addr: network byte order in memory.
func inAddr(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}
