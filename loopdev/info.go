package loopdev

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// The old LOOP_SET_STATUS and LOOP_GET_STATUS take a struct loop_info
// whose device numbers are __kernel_old_dev_t: unsigned long on x86_64,
// unsigned int on arm64 and in LKL, so the guest's layout (oldLoopInfo,
// info_*.go) is not LKL's. kbox serves them with LKL's LOOP_SET_STATUS64
// and LOOP_GET_STATUS64 (LKLCmd), converting as Linux converts between
// the two structures (loop_info64_from_old, loop_info64_to_old).

// loopInfoLayout is where struct loop_info's fields are for the guest.
type loopInfoLayout struct {
	size                   int
	device, inode, rdevice int // offsets
	devSize                int // bytes of lo_device and lo_rdevice (4 or 8)
	offset, flags, name    int // offsets of lo_offset, lo_flags, lo_name
}

// Offsets in struct loop_info64.
const (
	li64Device   = 0
	li64Inode    = 8
	li64Rdevice  = 16
	li64Offset   = 24
	li64Number   = 40
	li64Flags    = 52
	li64FileName = 56
	loNameSize   = 64
)

// FromOld returns the loop_info64 that the guest's struct loop_info b
// stands for: its number, devices, inode, offset, flags and name,
// everything else 0.
func FromOld(b []byte) []byte {
	l, ne := oldLoopInfo, binary.NativeEndian
	out := make([]byte, sizeInfo64)
	ne.PutUint32(out[li64Number:], ne.Uint32(b[0:]))
	ne.PutUint64(out[li64Device:], oldDev(b[l.device:], l.devSize))
	ne.PutUint64(out[li64Inode:], ne.Uint64(b[l.inode:]))
	ne.PutUint64(out[li64Rdevice:], oldDev(b[l.rdevice:], l.devSize))
	ne.PutUint64(out[li64Offset:], uint64(int64(int32(ne.Uint32(b[l.offset:])))))
	ne.PutUint32(out[li64Flags:], ne.Uint32(b[l.flags:]))
	copy(out[li64FileName:li64FileName+loNameSize], b[l.name:l.name+loNameSize])
	return out
}

// ToOld returns the guest's struct loop_info for LKL's loop_info64 b:
// EOVERFLOW when a device number, the inode or the offset does not fit.
func ToOld(b []byte) ([]byte, unix.Errno) {
	l, ne := oldLoopInfo, binary.NativeEndian
	out := make([]byte, l.size)
	ne.PutUint32(out[0:], ne.Uint32(b[li64Number:]))
	dev, rdev := ne.Uint64(b[li64Device:]), ne.Uint64(b[li64Rdevice:])
	ok := putOldDev(out[l.device:], l.devSize, dev) && putOldDev(out[l.rdevice:], l.devSize, rdev)
	ne.PutUint64(out[l.inode:], ne.Uint64(b[li64Inode:]))
	off := ne.Uint64(b[li64Offset:])
	ne.PutUint32(out[l.offset:], uint32(off))
	ne.PutUint32(out[l.flags:], ne.Uint32(b[li64Flags:]))
	copy(out[l.name:l.name+loNameSize], b[li64FileName:li64FileName+loNameSize])
	if !ok || uint64(int64(int32(uint32(off)))) != off {
		return nil, unix.EOVERFLOW
	}
	return out, 0
}

func oldDev(b []byte, size int) uint64 {
	if size == 8 {
		return binary.NativeEndian.Uint64(b)
	}
	return uint64(binary.NativeEndian.Uint32(b))
}

// putOldDev stores v in a field of size bytes; false if it does not fit.
func putOldDev(b []byte, size int, v uint64) bool {
	if size == 8 {
		binary.NativeEndian.PutUint64(b, v)
		return true
	}
	binary.NativeEndian.PutUint32(b, uint32(v))
	return v <= 0xffffffff
}
