package lkl

import (
	"encoding/binary"
	"errors"
)

// Stat64 is LKL's struct stat: the asm-generic layout, 128 bytes. x86_64's
// native struct stat is 144 bytes with st_mode at offset 24, not 16, so a
// guest on x86_64 always needs ToHost.
type Stat64 struct {
	Dev       uint64
	Ino       uint64
	Mode      uint32
	Nlink     uint32
	Uid       uint32
	Gid       uint32
	Rdev      uint64
	_         uint64
	Size      int64
	Blksize   int32
	_         int32
	Blocks    int64
	Atime     int64
	AtimeNsec uint64
	Mtime     int64
	MtimeNsec uint64
	Ctime     int64
	CtimeNsec uint64
	_         uint32
	_         uint32
}

// SizeofStat64 is sizeof(struct stat) in LKL's ABI.
const SizeofStat64 = 128

// SizeofStatx is sizeof(struct statx), identical on every architecture and
// in LKL, so statx results are copied to the guest unchanged.
const SizeofStatx = 256

// Dirent is one decoded linux_dirent64 record. Its layout (u64 ino, s64 off,
// u16 reclen, u8 type, name) is the same in LKL and on every host arch.
type Dirent struct {
	Ino    uint64
	Off    int64
	Reclen uint16
	Type   uint8
	Name   string
}

// ErrBadDirent reports a getdents64 buffer whose records do not fit.
var ErrBadDirent = errors.New("malformed dirent64 record")

// direntHeader is the size of linux_dirent64 before d_name.
const direntHeader = 19

// WalkDirents decodes the records of a getdents64 buffer in order, calling fn
// for each until it returns false.
func WalkDirents(buf []byte, fn func(Dirent) bool) error {
	for len(buf) > 0 {
		if len(buf) < direntHeader {
			return ErrBadDirent
		}
		reclen := binary.LittleEndian.Uint16(buf[16:18])
		if int(reclen) < direntHeader+1 || int(reclen) > len(buf) {
			return ErrBadDirent
		}
		name := buf[direntHeader:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		d := Dirent{
			Ino:    binary.LittleEndian.Uint64(buf[0:8]),
			Off:    int64(binary.LittleEndian.Uint64(buf[8:16])),
			Reclen: reclen,
			Type:   buf[18],
			Name:   string(name),
		}
		if !fn(d) {
			return nil
		}
		buf = buf[reclen:]
	}
	return nil
}

// Open flags whose values differ between asm-generic (LKL, x86_64) and arm64.
const (
	genericODirect    = 0o40000
	genericOLargefile = 0o100000
	genericODirectory = 0o200000
	genericONofollow  = 0o400000

	arm64ODirectory = 0o40000
	arm64ONofollow  = 0o100000
	arm64ODirect    = 0o200000
	arm64OLargefile = 0o400000

	remapMask = genericODirect | genericOLargefile | genericODirectory | genericONofollow
)

// OpenFlagsArm64ToLKL converts arm64 open(2) flags to LKL's asm-generic values.
func OpenFlagsArm64ToLKL(f uint32) uint32 {
	out := f &^ remapMask
	if f&arm64ODirectory != 0 {
		out |= genericODirectory
	}
	if f&arm64ONofollow != 0 {
		out |= genericONofollow
	}
	if f&arm64ODirect != 0 {
		out |= genericODirect
	}
	if f&arm64OLargefile != 0 {
		out |= genericOLargefile
	}
	return out
}

// OpenFlagsLKLToArm64 converts LKL's asm-generic open flags to arm64 values
// (for F_GETFL results).
func OpenFlagsLKLToArm64(f uint32) uint32 {
	out := f &^ remapMask
	if f&genericODirectory != 0 {
		out |= arm64ODirectory
	}
	if f&genericONofollow != 0 {
		out |= arm64ONofollow
	}
	if f&genericODirect != 0 {
		out |= arm64ODirect
	}
	if f&genericOLargefile != 0 {
		out |= arm64OLargefile
	}
	return out
}
