package lkl

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// COWBlock is the block size of a copy-on-write disk (cow.c).
const COWBlock = 4096

// COWLayer is a layer of a copy-on-write disk: a host fd holding the
// layer's blocks at their offsets in the image, and their map.
type COWLayer struct {
	FD  int
	Map *COWMap
}

// AddDiskCOW attaches a copy-on-write disk of size bytes: the host fd
// base (only ever read) under layers, bottom first. A block reads from
// the topmost layer whose map has it, else from base; writes go to the
// last layer only, each setting its block's bit in that layer's map,
// which the caller reads once the disk is unmounted and frees. The
// layers below are only read; their maps may be freed once the disk is
// added. Every fd must stay open while the kernel runs.
func AddDiskCOW(base int, size int64, layers []COWLayer) (Disk, error) {
	if !Available {
		return Disk{}, ErrNotBuilt
	}
	if size <= 0 || size%512 != 0 {
		return Disk{}, fmt.Errorf("lkl: add copy-on-write disk: size %d is not a positive multiple of 512", size)
	}
	if len(layers) == 0 {
		return Disk{}, fmt.Errorf("lkl: add copy-on-write disk: no layer to write")
	}
	for _, l := range layers {
		if l.Map == nil || l.Map.size != size {
			return Disk{}, fmt.Errorf("lkl: add copy-on-write disk: no dirty-block map for %d bytes", size)
		}
	}
	id := diskAddCOW(base, size, layers)
	if id < 0 {
		return Disk{}, fmt.Errorf("lkl: add copy-on-write disk: %w", unix.Errno(-id))
	}
	return Disk{ID: id}, nil
}

// PushCOW puts a new, empty top layer on copy-on-write disk d: the host
// fd over, with its zeroed map dirty. The layer below is sealed (nothing
// writes it again) and its map is the caller's to free. The file system
// on d must be frozen (or unmounted) meanwhile, so that no write is in
// flight.
func (d Disk) PushCOW(over int, dirty *COWMap) error {
	if !Available {
		return ErrNotBuilt
	}
	if dirty == nil {
		return fmt.Errorf("lkl: new copy-on-write layer: no map")
	}
	if e := diskPushCOW(d.ID, over, dirty); e < 0 {
		return fmt.Errorf("lkl: new copy-on-write layer: %w", unix.Errno(-e))
	}
	return nil
}

// COWRun says where the n bytes at off of copy-on-write disk d are: the
// host fd of the layer (or base) that holds the block at off, and how
// many of the n bytes from off that same fd holds, at the same offsets.
// fd is -1 for a disk that is not copy-on-write or a range off it. The
// answer holds while nothing writes those blocks.
func (d Disk) COWRun(off, n int64) (fd int, run int64) {
	if !Available || off < 0 || n <= 0 {
		return -1, 0
	}
	return diskCOWRun(d.ID, off, n)
}

// DirtyRanges returns the byte ranges [off, end) of the written blocks,
// adjacent blocks merged, clipped to the disk's size.
func (m *COWMap) DirtyRanges() [][2]int64 { return DirtyRanges(m.bytes(), m.size) }

// COWMapLen is the length in bytes of the map of a disk of size bytes.
func COWMapLen(size int64) int { return int((size + COWBlock*8 - 1) / (COWBlock * 8)) }

// Empty says whether no block is set.
func (m *COWMap) Empty() bool {
	for _, b := range m.bytes()[:COWMapLen(m.size)] {
		if b != 0 {
			return false
		}
	}
	return true
}

// Bytes returns a copy of the map (as saved beside a kept overlay).
func (m *COWMap) Bytes() []byte { return append([]byte{}, m.bytes()[:COWMapLen(m.size)]...) }

// Load sets the map from b, a map saved by Bytes for the same size.
func (m *COWMap) Load(b []byte) error {
	if len(b) != COWMapLen(m.size) {
		return fmt.Errorf("lkl: dirty-block map of %d bytes, want %d for a %d-byte disk", len(b), COWMapLen(m.size), m.size)
	}
	copy(m.bytes(), b)
	return nil
}

// DirtyRanges returns the byte ranges [off, end) of the blocks whose bit
// is set in bits (a COWMap's bytes), adjacent blocks merged, clipped to
// size.
func DirtyRanges(bits []byte, size int64) [][2]int64 {
	var out [][2]int64
	for blk := int64(0); blk*COWBlock < size && blk/8 < int64(len(bits)); blk++ {
		if bits[blk/8]&(1<<(blk%8)) == 0 {
			continue
		}
		off, end := blk*COWBlock, min((blk+1)*COWBlock, size)
		if n := len(out); n > 0 && out[n-1][1] == off {
			out[n-1][1] = end
		} else {
			out = append(out, [2]int64{off, end})
		}
	}
	return out
}
