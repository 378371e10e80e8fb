// Package scratchfs makes the private scratch filesystem behind the guest's
// /tmp: a sparse host file with no name, formatted here as ext4 (no
// journal) by a small formatter written from the on-disk format, then
// attached to LKL as a second disk by package rootfs.
//
// The formatter writes only the structures that are not zero: the
// superblock and group descriptors (and their backups), every group's block
// bitmap, group 0's inode bitmap and first inode-table block, and four
// small directories. The other groups' inode bitmaps are left out: those
// groups are marked as having no inodes in use yet (uninit_bg), and every
// inode table is declared zeroed, which a hole in a fresh file is.
// Formatting 8 GiB therefore writes about 400 KB and takes about a
// millisecond.
package scratchfs

import (
	"errors"
	"fmt"
)

const (
	// BlockSize is the filesystem block size.
	BlockSize = 4096
	// InodeSize is the on-disk inode size.
	InodeSize = 256
	// BlocksPerGroup is fixed by the block bitmap: one block of bits.
	BlocksPerGroup = BlockSize * 8
	// BytesPerInode is the inode ratio (mke2fs's default for ext4).
	BytesPerInode = 16384
	// MinSize is the smallest filesystem Format makes.
	MinSize = 1 << 20
	// MaxSize bounds the filesystem: the kernel keeps every group
	// descriptor and a per-group structure in memory (LKL has 32 MB by
	// default), and every backup copy of the descriptors is written here.
	MaxSize = 1 << 40

	inodesPerBlock = BlockSize / InodeSize
	descSize       = 32
	descsPerBlock  = BlockSize / descSize
	// firstIno is the first inode not reserved by the format.
	firstIno = 11
	// minLastGroup is the fewest data blocks a trailing partial group must
	// offer beyond its metadata to be kept; a smaller tail is left unused.
	minLastGroup = 64
)

// Inodes and data blocks made by Format.
const (
	rootIno      = 2
	lostFoundIno = 11
	tmpIno       = 12
	shmIno       = 13
	usedInodes   = 13 // inodes 1..13: the reserved ones and the three directories
	lostFoundLen = 4  // blocks: room for entries when the filesystem is full
	dataBlocks   = 1 + lostFoundLen + 1 + 1
)

// Geometry is the layout of a scratch filesystem of a given size.
type Geometry struct {
	Blocks           uint32 // filesystem blocks (the file may be longer)
	Groups           uint32
	InodesPerGroup   uint32
	Inodes           uint32
	InodeTableBlocks uint32 // per group
	GDTBlocks        uint32 // group descriptor table, per copy
	FreeBlocks       uint32
	FreeInodes       uint32
	// Overhead is the number of metadata blocks in all groups, as the
	// kernel counts them at mount (s_overhead_clusters).
	Overhead uint32
	// Journal is the number of blocks of the journal (inode 8), 0 for
	// none: the scratch disk has none, images kbox builds have one
	// (WithJournal).
	Journal uint32
}

// ErrSize reports a size outside [MinSize, MaxSize].
var ErrSize = errors.New("scratch filesystem size out of range")

// NewGeometry lays out a filesystem in size bytes: 4 KiB blocks, 32768
// blocks per group, one 256-byte inode per 16 KiB. A trailing partial group
// too small to be useful is dropped (the file keeps its length; the
// filesystem ends before).
func NewGeometry(size int64) (Geometry, error) {
	if size < MinSize || size > MaxSize {
		return Geometry{}, fmt.Errorf("%w: %d bytes (want %d to %d)", ErrSize, size, int64(MinSize), int64(MaxSize))
	}
	var g Geometry
	g.Blocks = uint32(size / BlockSize)
	g.Groups = ceilDiv(g.Blocks, BlocksPerGroup)
	g.InodesPerGroup = inodesPerGroup(size, g.Groups)
	g.InodeTableBlocks = g.InodesPerGroup / inodesPerBlock
	g.GDTBlocks = ceilDiv(g.Groups, descsPerBlock)
	if last := g.Groups - 1; last > 0 && g.groupBlocks(last) < g.overhead(last)+minLastGroup {
		// The tail cannot hold its own metadata and some data: drop it,
		// keeping the inode count per group.
		g.Groups--
		g.Blocks = g.Groups * BlocksPerGroup
		g.GDTBlocks = ceilDiv(g.Groups, descsPerBlock)
	}
	if g.groupBlocks(0) < g.overhead(0)+dataBlocks {
		return Geometry{}, fmt.Errorf("%w: %d bytes cannot hold the metadata", ErrSize, size)
	}
	g.Inodes = g.InodesPerGroup * g.Groups
	g.FreeInodes = g.Inodes - usedInodes
	for i := uint32(0); i < g.Groups; i++ {
		g.FreeBlocks += g.groupFree(i)
		g.Overhead += g.overhead(i)
	}
	return g, nil
}

// inodesPerGroup spreads one inode per BytesPerInode over the groups,
// rounded up to whole inode-table blocks, with at least enough for the
// reserved inodes and at most what one bitmap block can track.
func inodesPerGroup(size int64, groups uint32) uint32 {
	want := uint64(size) / BytesPerInode
	ipg := uint32((want + uint64(groups) - 1) / uint64(groups))
	ipg = ceilDiv(ipg, inodesPerBlock) * inodesPerBlock
	if ipg < 2*inodesPerBlock {
		ipg = 2 * inodesPerBlock
	}
	if ipg > BlocksPerGroup {
		ipg = BlocksPerGroup
	}
	return ipg
}

func ceilDiv(a, b uint32) uint32 { return (a + b - 1) / b }

// groupStart is the first block of group i.
func (g Geometry) groupStart(i uint32) uint32 { return i * BlocksPerGroup }

// groupBlocks is the number of blocks in group i (the last may be short).
func (g Geometry) groupBlocks(i uint32) uint32 {
	if i == g.Groups-1 {
		return g.Blocks - g.groupStart(i)
	}
	return BlocksPerGroup
}

// HasSuper reports whether group i holds a copy of the superblock and
// descriptors (sparse_super: groups 0, 1 and powers of 3, 5 and 7).
func HasSuper(i uint32) bool {
	if i <= 1 {
		return true
	}
	for _, base := range []uint32{3, 5, 7} {
		n := base
		for n < i {
			n *= base
		}
		if n == i {
			return true
		}
	}
	return false
}

// blockBitmap, inodeBitmap and inodeTable are the metadata blocks of group
// i: right after its superblock and descriptor copy, if it has one.
func (g Geometry) blockBitmap(i uint32) uint32 {
	b := g.groupStart(i)
	if HasSuper(i) {
		b += 1 + g.GDTBlocks
	}
	return b
}

func (g Geometry) inodeBitmap(i uint32) uint32 { return g.blockBitmap(i) + 1 }
func (g Geometry) inodeTable(i uint32) uint32  { return g.blockBitmap(i) + 2 }

// overhead is the number of metadata blocks at the start of group i.
func (g Geometry) overhead(i uint32) uint32 {
	return g.blockBitmap(i) - g.groupStart(i) + 2 + g.InodeTableBlocks
}

// firstData is group 0's first data block: the directories made by Format.
func (g Geometry) firstData() uint32 { return g.inodeTable(0) + g.InodeTableBlocks }

// journalStart is the journal's first block: right after the directories.
func (g Geometry) journalStart() uint32 { return g.firstData() + dataBlocks }

// used0 is the number of data blocks in use in group 0 after formatting:
// the directories and the journal.
func (g Geometry) used0() uint32 { return dataBlocks + g.Journal }

// groupFree is the number of free blocks in group i after formatting.
func (g Geometry) groupFree(i uint32) uint32 {
	free := g.groupBlocks(i) - g.overhead(i)
	if i == 0 {
		free -= g.used0()
	}
	return free
}

// maxJournalExtent is the longest extent of initialized blocks: the
// journal is one extent, in group 0.
const maxJournalExtent = 32768

// WithJournal returns g with a journal sized as mke2fs sizes one for
// that many blocks (none below 2048 blocks: 8 MiB), cut to what group 0
// has free beyond minLastGroup blocks.
func (g Geometry) WithJournal() Geometry {
	var j uint32
	switch {
	case g.Blocks < 2048:
		j = 0
	case g.Blocks < 32768:
		j = 1024
	case g.Blocks < 256*1024:
		j = 4096
	case g.Blocks < 512*1024:
		j = 8192
	case g.Blocks < 4096*1024:
		j = 16384
	default:
		j = maxJournalExtent
	}
	if free := g.groupFree(0); j+minLastGroup > free {
		j = 0
		if free > 1024+minLastGroup {
			j = (free - minLastGroup) &^ 1023
		}
	}
	g.Journal = j
	g.FreeBlocks -= j
	return g
}
