package lkl

import (
	"encoding/binary"
	"runtime"
)

// Extent is a stretch of a file's bytes and where they lie on its disk
// (FS_IOC_FIEMAP's struct fiemap_extent).
type Extent struct {
	Logical, Physical, Length uint64
	Flags                     uint32
}

// Extent flags (FIEMAP_EXTENT_*) a caller may accept; any other says the
// bytes on the disk are not simply the file's (inline, encrypted, not yet
// allocated, ...).
const (
	ExtentLast      = 0x1
	ExtentUnwritten = 0x800 // allocated, reads as zeros
	ExtentMerged    = 0x1000
)

const (
	fsIocFiemap    = 0xc020660b // _IOWR('f', 11, struct fiemap)
	fiemapHeader   = 32
	fiemapExtent   = 56
	fiemapLogical  = 0
	fiemapPhysical = 8
	fiemapLength   = 16
	fiemapFlags    = 40
)

// Extents returns up to max extents of the file open at fd, from byte
// start on (FS_IOC_FIEMAP, no sync: for a filesystem nothing writes).
func Extents(fd int, start uint64, max int) ([]Extent, error) {
	buf := make([]byte, fiemapHeader+fiemapExtent*max)
	ne := binary.NativeEndian
	ne.PutUint64(buf[0:], start)
	ne.PutUint64(buf[8:], ^uint64(0)-start) // fm_length: to the end
	ne.PutUint32(buf[24:], uint32(max))     // fm_extent_count
	_, e := Syscall6(SysIoctl, uintptr(fd), fsIocFiemap, Ptr(buf), 0, 0, 0)
	runtime.KeepAlive(buf)
	if e != 0 {
		return nil, e
	}
	n := min(int(ne.Uint32(buf[20:])), max) // fm_mapped_extents
	out := make([]Extent, n)
	for i := range out {
		x := buf[fiemapHeader+fiemapExtent*i:]
		out[i] = Extent{
			Logical:  ne.Uint64(x[fiemapLogical:]),
			Physical: ne.Uint64(x[fiemapPhysical:]),
			Length:   ne.Uint64(x[fiemapLength:]),
			Flags:    ne.Uint32(x[fiemapFlags:]),
		}
	}
	return out, nil
}
