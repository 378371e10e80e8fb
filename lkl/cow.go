package lkl

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// COWBlock is the block size of a copy-on-write disk (cow.c).
const COWBlock = 4096

// AddDiskCOW attaches a copy-on-write disk of size bytes: reads come
// from the host fd base (only ever read) unless written, writes go to the
// host fd over at the same offsets (a sparse file), and each written
// block's bit is set in dirty (NewCOWMap(size)), which the caller reads
// after the unmount and frees. Both fds must stay open while the kernel
// runs.
func AddDiskCOW(base, over int, size int64, dirty *COWMap) (Disk, error) {
	if !Available {
		return Disk{}, ErrNotBuilt
	}
	if size <= 0 || size%512 != 0 {
		return Disk{}, fmt.Errorf("lkl: add copy-on-write disk: size %d is not a positive multiple of 512", size)
	}
	if dirty == nil || dirty.size != size {
		return Disk{}, fmt.Errorf("lkl: add copy-on-write disk: no dirty-block map for %d bytes", size)
	}
	id := diskAddCOW(base, over, size, dirty)
	if id < 0 {
		return Disk{}, fmt.Errorf("lkl: add copy-on-write disk: %w", unix.Errno(-id))
	}
	return Disk{ID: id}, nil
}

// DirtyRanges returns the byte ranges [off, end) of the written blocks,
// adjacent blocks merged, clipped to the disk's size.
func (m *COWMap) DirtyRanges() [][2]int64 { return DirtyRanges(m.bytes(), m.size) }

// COWMapLen is the length in bytes of the map of a disk of size bytes.
func COWMapLen(size int64) int { return int((size + COWBlock*8 - 1) / (COWBlock * 8)) }

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
