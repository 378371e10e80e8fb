package scratchfs

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// On-disk constants of the ext2/ext4 format used here.
const (
	superOffset = 1024
	superMagic  = 0xEF53

	compatHasJournal = 0x4
	compatDirIndex   = 0x20

	incompatFiletype = 0x2
	incompatExtents  = 0x40

	roCompatSparseSuper = 0x1
	roCompatLargeFile   = 0x2
	roCompatGdtCsum     = 0x10
	roCompatDirNlink    = 0x20
	roCompatExtraIsize  = 0x40

	bgInodeUninit  = 0x1
	bgInodeZeroed  = 0x4
	flagSignedHash = 0x1
	errorsRemount  = 2
	hashHalfMD4    = 1
	extraIsize     = 32

	inodeFlagExtents = 0x80000
	extentMagic      = 0xF30A
	fileTypeDir      = 2

	modeDir = 0o040000
	modeReg = 0o100000

	journalIno = 8
	// jbd2's superblock (big-endian): its magic and the v2 block type.
	jbdMagic        = 0xC03B3998
	jbdSuperblockV2 = 4
)

// Params are the parts of a format that are not geometry: times and the
// random identifiers. Zero values are fine for tests.
type Params struct {
	Now      time.Time
	UUID     [16]byte
	HashSeed [16]byte
	Label    string
}

var le = binary.LittleEndian

// Format writes the filesystem described by g to w, which must read as
// zeros wherever nothing is written (a fresh sparse file).
func Format(w io.WriterAt, g Geometry, p Params) error {
	now := uint32(p.Now.Unix())
	gdt := g.descriptors(p.UUID)
	for i := uint32(0); i < g.Groups; i++ {
		if !HasSuper(i) {
			continue
		}
		at := int64(g.groupStart(i)) * BlockSize
		if i == 0 {
			at = superOffset
		}
		if err := put(w, g.superblock(i, p, now), at); err != nil {
			return err
		}
		if err := put(w, gdt, int64(g.groupStart(i)+1)*BlockSize); err != nil {
			return err
		}
	}
	// Every group's block bitmap is written: with the group marked
	// BLOCK_UNINIT instead, the kernel would compute its free count at
	// every mount, looping over each inode-table block (about 20 µs a
	// group in LKL), and this runs on the host while LKL boots.
	var bitmap []byte
	for i := uint32(0); i < g.Groups; i++ {
		if bitmap == nil || i == 0 || i == 1 || i == g.Groups-1 || HasSuper(i) != HasSuper(i-1) {
			bitmap = g.blockBitmapOf(i)
		}
		if err := put(w, bitmap, int64(g.blockBitmap(i))*BlockSize); err != nil {
			return err
		}
	}
	if err := put(w, g.inodeBitmap0(), int64(g.inodeBitmap(0))*BlockSize); err != nil {
		return err
	}
	if err := put(w, g.inodeBlock0(now), int64(g.inodeTable(0))*BlockSize); err != nil {
		return err
	}
	for _, d := range g.directoryBlocks() {
		if err := put(w, d.data, int64(d.block)*BlockSize); err != nil {
			return err
		}
	}
	if g.Journal > 0 {
		// The journal's superblock; its other blocks are zeros (a hole).
		if err := put(w, g.journalSuper(p.UUID), int64(g.journalStart())*BlockSize); err != nil {
			return err
		}
	}
	return nil
}

// journalSuper is the journal's first block: an empty journal (s_start 0,
// nothing to recover) of g.Journal blocks, its first log block 1, one
// user (the filesystem), as an internal journal has.
func (g Geometry) journalSuper(uuid [16]byte) []byte {
	b := make([]byte, BlockSize)
	be := binary.BigEndian
	be.PutUint32(b[0x00:], jbdMagic)
	be.PutUint32(b[0x04:], jbdSuperblockV2)
	be.PutUint32(b[0x0C:], BlockSize) // s_blocksize
	be.PutUint32(b[0x10:], g.Journal) // s_maxlen
	be.PutUint32(b[0x14:], 1)         // s_first
	be.PutUint32(b[0x18:], 1)         // s_sequence
	copy(b[0x30:0x40], uuid[:])       // s_uuid
	be.PutUint32(b[0x40:], 1)         // s_nr_users
	return b
}

func put(w io.WriterAt, b []byte, off int64) error {
	if _, err := w.WriteAt(b, off); err != nil {
		return fmt.Errorf("scratchfs: write at %d: %w", off, err)
	}
	return nil
}

// superblock is the 1024-byte superblock as stored in group i.
func (g Geometry) superblock(i uint32, p Params, now uint32) []byte {
	sb := make([]byte, 1024)
	le.PutUint32(sb[0x00:], g.Inodes)
	le.PutUint32(sb[0x04:], g.Blocks)
	le.PutUint32(sb[0x08:], 0) // no blocks reserved for root: it is /tmp
	le.PutUint32(sb[0x0C:], g.FreeBlocks)
	le.PutUint32(sb[0x10:], g.FreeInodes)
	le.PutUint32(sb[0x14:], 0) // first data block (0 with 4 KiB blocks)
	le.PutUint32(sb[0x18:], 2) // log2(block size) - 10
	le.PutUint32(sb[0x1C:], 2) // cluster size = block size
	le.PutUint32(sb[0x20:], BlocksPerGroup)
	le.PutUint32(sb[0x24:], BlocksPerGroup)
	le.PutUint32(sb[0x28:], g.InodesPerGroup)
	le.PutUint32(sb[0x30:], now)    // write time
	le.PutUint16(sb[0x36:], 0xFFFF) // max mount count: -1, never forced
	le.PutUint16(sb[0x38:], superMagic)
	le.PutUint16(sb[0x3A:], 1) // state: clean
	le.PutUint16(sb[0x3C:], errorsRemount)
	le.PutUint32(sb[0x40:], now) // last check
	le.PutUint32(sb[0x4C:], 1)   // dynamic revision
	le.PutUint32(sb[0x54:], firstIno)
	le.PutUint16(sb[0x58:], InodeSize)
	le.PutUint16(sb[0x5A:], uint16(i))
	if g.Journal > 0 {
		le.PutUint32(sb[0x5C:], compatDirIndex|compatHasJournal)
		le.PutUint32(sb[0xE0:], journalIno)
		// A backup of the journal inode's block map and size
		// (s_jnl_blocks, EXT3_JNL_BACKUP_BLOCKS), as e2fsck wants it.
		sb[0xFD] = 1
		copy(sb[0x10C:0x10C+60], g.journalInode(now)[0x28:0x64])
		le.PutUint32(sb[0x10C+64:], g.Journal*BlockSize)
	} else {
		le.PutUint32(sb[0x5C:], compatDirIndex)
	}
	le.PutUint32(sb[0x60:], incompatFiletype|incompatExtents)
	le.PutUint32(sb[0x64:], roCompatSparseSuper|roCompatLargeFile|roCompatGdtCsum|roCompatDirNlink|roCompatExtraIsize)
	copy(sb[0x68:0x78], p.UUID[:])
	copy(sb[0x78:0x88], p.Label)
	copy(sb[0xEC:0xFC], p.HashSeed[:])
	sb[0xFC] = hashHalfMD4
	le.PutUint32(sb[0x108:], now) // mkfs time
	le.PutUint16(sb[0x15C:], extraIsize)
	le.PutUint16(sb[0x15E:], extraIsize)
	le.PutUint32(sb[0x160:], flagSignedHash)
	// The kernel recomputes the overhead at every mount and rewrites every
	// superblock copy when it differs from this field: give it the value.
	le.PutUint32(sb[0x248:], g.Overhead)
	return sb
}

// descriptors is the group descriptor table, GDTBlocks long.
func (g Geometry) descriptors(uuid [16]byte) []byte {
	b := make([]byte, int(g.GDTBlocks)*BlockSize)
	for i := uint32(0); i < g.Groups; i++ {
		d := b[i*descSize : (i+1)*descSize]
		le.PutUint32(d[0x00:], g.blockBitmap(i))
		le.PutUint32(d[0x04:], g.inodeBitmap(i))
		le.PutUint32(d[0x08:], g.inodeTable(i))
		le.PutUint16(d[0x0C:], uint16(g.groupFree(i)))
		flags := uint16(bgInodeZeroed)
		switch {
		case i == 0:
			le.PutUint16(d[0x0E:], uint16(g.InodesPerGroup-usedInodes))
			le.PutUint16(d[0x10:], 4) // root, lost+found, tmp, shm
			le.PutUint16(d[0x1C:], uint16(g.InodesPerGroup-usedInodes))
		default:
			le.PutUint16(d[0x0E:], uint16(g.InodesPerGroup))
			le.PutUint16(d[0x1C:], uint16(g.InodesPerGroup))
			flags |= bgInodeUninit
		}
		le.PutUint16(d[0x12:], flags)
		le.PutUint16(d[0x1E:], descChecksum(uuid, i, d))
	}
	return b
}

// blockBitmapOf is group i's block bitmap: its metadata (and, in group 0,
// the directories) in use, and the bits past a short last group set.
func (g Geometry) blockBitmapOf(i uint32) []byte {
	b := make([]byte, BlockSize)
	used := g.overhead(i)
	if i == 0 {
		used += g.used0()
	}
	setBits(b, 0, used)
	setBits(b, g.groupBlocks(i), BlocksPerGroup)
	return b
}

// inodeBitmap0 is group 0's inode bitmap: inodes 1..13 in use, the bits
// past the group's inodes set.
func (g Geometry) inodeBitmap0() []byte {
	b := make([]byte, BlockSize)
	setBits(b, 0, usedInodes)
	setBits(b, g.InodesPerGroup, BlockSize*8)
	return b
}

func setBits(b []byte, from, to uint32) {
	for n := from; n < to; n++ {
		b[n/8] |= 1 << (n % 8)
	}
}

// dirBlock is one directory data block and where it goes.
type dirBlock struct {
	block uint32
	data  []byte
}

type dirent struct {
	ino  uint32
	name string
}

// The directories' first blocks, in the order of their data blocks.
func (g Geometry) rootBlock() uint32      { return g.firstData() }
func (g Geometry) lostFoundBlock() uint32 { return g.firstData() + 1 }
func (g Geometry) tmpBlock() uint32       { return g.firstData() + 1 + lostFoundLen }
func (g Geometry) shmBlock() uint32       { return g.tmpBlock() + 1 }

func (g Geometry) directoryBlocks() []dirBlock {
	ds := []dirBlock{
		{g.rootBlock(), dirData(rootIno, rootIno, dirent{lostFoundIno, "lost+found"}, dirent{tmpIno, "tmp"}, dirent{shmIno, "shm"})},
		{g.lostFoundBlock(), dirData(lostFoundIno, rootIno)},
		{g.tmpBlock(), dirData(tmpIno, rootIno)},
		{g.shmBlock(), dirData(shmIno, rootIno)},
	}
	for i := uint32(1); i < lostFoundLen; i++ {
		// An empty directory block: one unused entry spanning it.
		b := make([]byte, BlockSize)
		le.PutUint16(b[4:], BlockSize)
		ds = append(ds, dirBlock{g.lostFoundBlock() + i, b})
	}
	return ds
}

// dirData is a directory block holding ".", ".." and entries, all
// directories; the last entry's record runs to the end of the block.
func dirData(self, parent uint32, entries ...dirent) []byte {
	all := append([]dirent{{self, "."}, {parent, ".."}}, entries...)
	b := make([]byte, BlockSize)
	off := 0
	for k, e := range all {
		rec := (8 + len(e.name) + 3) &^ 3
		if k == len(all)-1 {
			rec = BlockSize - off
		}
		le.PutUint32(b[off:], e.ino)
		le.PutUint16(b[off+4:], uint16(rec))
		b[off+6] = byte(len(e.name))
		b[off+7] = fileTypeDir
		copy(b[off+8:], e.name)
		off += rec
	}
	return b
}

// inodeBlock0 is the first block of group 0's inode table: inodes 1..16,
// of which 2, 11, 12 and 13 are the directories (the reserved ones stay
// zero).
func (g Geometry) inodeBlock0(now uint32) []byte {
	b := make([]byte, BlockSize)
	dir := func(ino uint32, mode uint16, links uint16, start, blocks uint32) {
		copy(b[(ino-1)*InodeSize:ino*InodeSize], oneExtentInode(modeDir|mode, links, start, blocks, now))
	}
	dir(rootIno, 0o755, 5, g.rootBlock(), 1) // ., .. and three subdirectories' ..
	dir(lostFoundIno, 0o700, 2, g.lostFoundBlock(), lostFoundLen)
	dir(tmpIno, 0o1777, 2, g.tmpBlock(), 1)
	dir(shmIno, 0o1777, 2, g.shmBlock(), 1)
	if g.Journal > 0 {
		copy(b[(journalIno-1)*InodeSize:journalIno*InodeSize], g.journalInode(now))
	}
	return b
}

// journalInode is inode 8: a regular file of the journal's blocks.
func (g Geometry) journalInode(now uint32) []byte {
	return oneExtentInode(modeReg|0o600, 1, g.journalStart(), g.Journal, now)
}

// oneExtentInode is an inode of mode whose data is blocks blocks from
// start, one extent (at most maxJournalExtent blocks).
func oneExtentInode(mode, links uint16, start, blocks, now uint32) []byte {
	in := make([]byte, InodeSize)
	le.PutUint16(in[0x00:], mode)
	le.PutUint32(in[0x04:], blocks*BlockSize) // size
	le.PutUint32(in[0x08:], now)              // atime
	le.PutUint32(in[0x0C:], now)              // ctime
	le.PutUint32(in[0x10:], now)              // mtime
	le.PutUint16(in[0x1A:], links)
	le.PutUint32(in[0x1C:], blocks*BlockSize/512) // 512-byte sectors
	le.PutUint32(in[0x20:], inodeFlagExtents)
	// i_block: an extent header and one extent.
	eb := in[0x28:0x64]
	le.PutUint16(eb[0:], extentMagic)
	le.PutUint16(eb[2:], 1) // entries
	le.PutUint16(eb[4:], 4) // max entries in the inode
	le.PutUint16(eb[6:], 0) // depth: leaf
	le.PutUint32(eb[12:], 0)
	le.PutUint16(eb[16:], uint16(blocks))
	le.PutUint16(eb[18:], 0) // start, high 16 bits
	le.PutUint32(eb[20:], start)
	le.PutUint16(in[0x80:], extraIsize)
	le.PutUint32(in[0x90:], now) // creation time
	return in
}

// descChecksum is the uninit_bg descriptor checksum: CRC-16 (the
// reflected 0x8005 polynomial, seeded with all ones) over the filesystem
// UUID, the little-endian group number and the descriptor up to its
// checksum field.
func descChecksum(uuid [16]byte, group uint32, d []byte) uint16 {
	var n [4]byte
	le.PutUint32(n[:], group)
	crc := crc16(0xFFFF, uuid[:])
	crc = crc16(crc, n[:])
	return crc16(crc, d[:0x1E])
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i)
		for k := 0; k < 8; k++ {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(crc uint16, b []byte) uint16 {
	for _, x := range b {
		crc = crc>>8 ^ crc16Table[byte(crc)^x]
	}
	return crc
}
