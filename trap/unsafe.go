//go:build linux && amd64 && cgo

package trap

import (
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Guest memory is kbox's own address space: kbox reads and writes it
// directly, with SetPanicOnFault on, so that a bad guest address faults
// into a panic these functions recover into EFAULT (on a guest thread,
// core.c hands a fault in kbox code to Go's handler). They copy
// page by page so that a string or buffer that ends just before unmapped
// memory still reads.

// lowest and highest user addresses kbox will touch for the guest.
const (
	minAddr = 4096
	maxAddr = 1 << 47
)

// ptr turns a guest address into a pointer without a conversion vet
// would flag: the address is the guest's, not a Go object's.
func ptr(addr uint64) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

// copyIn copies len(b) bytes at addr into b; false on a fault.
func copyIn(b []byte, addr uint64) (ok bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	copy(b, unsafe.Slice((*byte)(ptr(addr)), len(b)))
	return true
}

// fileFrom writes the n bytes at addr to the start of file fd, copied
// by the kernel (pwrite from guest memory: EFAULT, not a fault, where it
// is not readable); false if it could not write them all.
func fileFrom(fd int, addr uint64, n int) bool {
	src := unsafe.Slice((*byte)(ptr(addr)), n)
	for off := 0; off < n; {
		k, err := unix.Pwrite(fd, src[off:], int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			return false
		}
		off += k
	}
	return true
}

// copyOut copies b to addr; false on a fault.
func copyOut(addr uint64, b []byte) (ok bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	copy(unsafe.Slice((*byte)(ptr(addr)), len(b)), b)
	return true
}

func inUser(addr uint64, n int) bool {
	return addr >= minAddr && addr < maxAddr && uint64(n) <= maxAddr-addr
}

// readSome copies up to len(b) bytes at addr, stopping at the first page
// that faults.
func readSome(addr uint64, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if addr < minAddr || addr >= maxAddr {
		return 0, unix.EFAULT
	}
	got := 0
	for got < len(b) {
		a := addr + uint64(got)
		if a >= maxAddr {
			break
		}
		n := min(len(b)-got, pageSize-int(a%pageSize))
		if !copyIn(b[got:got+n], a) {
			break
		}
		got += n
	}
	if got == 0 {
		return 0, unix.EFAULT
	}
	return got, nil
}

// readMem copies all of len(b) bytes at addr, or fails with EFAULT.
func readMem(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if !inUser(addr, len(b)) || !copyIn(b, addr) {
		return unix.EFAULT
	}
	return nil
}

// writeMem copies b to addr, which must be guest memory (mem), or fails
// with EFAULT.
func writeMem(mem *regions, addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if !inUser(addr, len(b)) || !mem.contains(addr, addr+uint64(len(b))) || !copyOut(addr, b) {
		return unix.EFAULT
	}
	return nil
}

// readU64 and writeU64 are word-sized helpers.
func readU64(addr uint64) (uint64, error) {
	var b [8]byte
	if err := readMem(addr, b[:]); err != nil {
		return 0, err
	}
	return *(*uint64)(unsafe.Pointer(&b)), nil
}

func writeU64(mem *regions, addr, v uint64) error {
	return writeMem(mem, addr, (*[8]byte)(unsafe.Pointer(&v))[:])
}

func writeU32(mem *regions, addr uint64, v uint32) error {
	return writeMem(mem, addr, (*[4]byte)(unsafe.Pointer(&v))[:])
}

// bytesOf views a fixed-size value as bytes.
func bytesOf[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// nativeOut runs syscall nr with a, argument idx replaced by p, kbox
// memory the kernel writes (a pipe's fds, a limit). The conversion is in
// the call, as package syscall requires, so p stays alive and in place.
func nativeOut(nr int, a [6]uint64, idx int, p unsafe.Pointer) unix.Errno {
	var en unix.Errno
	switch idx {
	case 0:
		_, _, en = unix.Syscall6(uintptr(nr), uintptr(p), uintptr(a[1]), uintptr(a[2]), uintptr(a[3]), uintptr(a[4]), uintptr(a[5]))
	case 1:
		_, _, en = unix.Syscall6(uintptr(nr), uintptr(a[0]), uintptr(p), uintptr(a[2]), uintptr(a[3]), uintptr(a[4]), uintptr(a[5]))
	case 3:
		_, _, en = unix.Syscall6(uintptr(nr), uintptr(a[0]), uintptr(a[1]), uintptr(a[2]), uintptr(p), uintptr(a[4]), uintptr(a[5]))
	default:
		en = unix.EINVAL
	}
	return en
}

// nativePair runs pipe, pipe2 or socketpair with the fds written to kbox
// memory.
func nativePair(nr int, a [6]uint64, idx int) ([2]int32, unix.Errno) {
	fds := new([2]int32)
	en := nativeOut(nr, a, idx, unsafe.Pointer(fds))
	return *fds, en
}

// nativeRlimit is getrlimit(res) into kbox memory.
func nativeRlimit(res uint64) ([2]uint64, unix.Errno) {
	lim := new([2]uint64)
	en := nativeOut(unix.SYS_GETRLIMIT, [6]uint64{res}, 1, unsafe.Pointer(lim))
	return *lim, en
}

// store2 stores v at b[i:i+2] as one 16-bit store (atomic within a cache
// line: the rewrite tier's patch protocol).
func store2(b []byte, i int, v [2]byte) {
	_ = b[i+1]
	*(*uint16)(unsafe.Pointer(&b[i])) = uint16(v[0]) | uint16(v[1])<<8
}
