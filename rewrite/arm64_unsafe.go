package rewrite

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Arm64SliceAlias is code at Base seen through Mem: a Go slice, or on the
// real path the read-write mapping of the memfd that backs guest text
// (unix.Mmap of the same pages the guest runs read-execute). Store32 is
// one aligned 32-bit atomic store, single-copy atomic on arm64 (and
// amd64), which is what a live site needs.
type Arm64SliceAlias struct {
	Base uint64
	Mem  []byte
}

func (a Arm64SliceAlias) word(addr uint64) (*uint32, error) {
	if addr%4 != 0 {
		return nil, fmt.Errorf("%w: word at %#x", ErrArm64Align, addr)
	}
	if addr < a.Base || addr-a.Base >= uint64(len(a.Mem)) || uint64(len(a.Mem))-(addr-a.Base) < 4 {
		return nil, fmt.Errorf("rewrite/arm64: %#x is outside the %d bytes at %#x", addr, len(a.Mem), a.Base)
	}
	p := unsafe.Pointer(&a.Mem[addr-a.Base])
	if uintptr(p)%4 != 0 {
		return nil, fmt.Errorf("%w: alias of %#x is not 4-byte aligned in memory", ErrArm64Align, addr)
	}
	return (*uint32)(p), nil
}

// Load32 reads the word at addr (little-endian, as A64 code always is on
// Linux; the host is little-endian too).
func (a Arm64SliceAlias) Load32(addr uint64) (uint32, error) {
	p, err := a.word(addr)
	if err != nil {
		return 0, err
	}
	return atomic.LoadUint32(p), nil
}

// Store32 writes the word at addr with one atomic store.
func (a Arm64SliceAlias) Store32(addr uint64, w uint32) error {
	p, err := a.word(addr)
	if err != nil {
		return err
	}
	atomic.StoreUint32(p, w)
	return nil
}
