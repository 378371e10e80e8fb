package shadowfd

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Write-back: bringing LKL's copy of a node up to date.
//
// Guests write content files natively, so kbox does not see which bytes
// changed. A node keeps a hash of each 64 KiB chunk of its content as LKL
// holds it; a write-back hashes the content again and writes to LKL only
// the chunks that differ (an append, or a page changed through a shared
// mapping, costs one chunk, not the file). Stores through a shared
// mapping change no time stamp, so a node that had a writable description
// since its last write-back is hashed even when its change time is the
// same; one that had none is clean when its change time is.
//
// Holes stay holes: the content file's data extents (SEEK_DATA/SEEK_HOLE)
// decide what is written; the rest of a changed chunk is punched out of
// LKL's file, so a sparse file stays sparse in the image (du, SEEK_HOLE
// and fallocate's PUNCH_HOLE as on Linux).
//
// A write-back that fails (ENOSPC, EIO from the image) keeps the node's
// error: the next fsync, fdatasync, msync, sync or syncfs that covers the
// file returns it, as Linux reports a failed writeback, and the node is not
// dropped before that (or before exit, which reports it on stderr).

const chunkSize = 64 << 10

// holeSum is the sum of a chunk that holds no data.
const holeSum = 0

var sumSeed = maphash.MakeSeed()

// chunkSum hashes a chunk's data and where its data ranges lie.
func chunkSum(data []byte, ranges []extent) uint64 {
	var h maphash.Hash
	h.SetSeed(sumSeed)
	h.Write(data)
	var b [16]byte
	for _, r := range ranges {
		putInt64(b[:8], r.off)
		putInt64(b[8:], r.end)
		h.Write(b[:])
	}
	return h.Sum64() | 1
}

func putInt64(b []byte, v int64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// extent is a range of data [off, end).
type extent struct{ off, end int64 }

// dataExtents lists the data ranges of the host file fd up to size.
func dataExtents(fd int, size int64, out []extent) ([]extent, error) {
	out = out[:0]
	for pos := int64(0); pos < size; {
		off, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break
		}
		if err != nil {
			return nil, err
		}
		if off >= size {
			break
		}
		end, err := unix.Seek(fd, off, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		out = append(out, extent{off, min(end, size)})
		pos = end
	}
	return out, nil
}

// within returns the parts of exts inside [a, b), from index *i on (exts
// are sorted; *i advances past extents that end before b).
func within(exts []extent, i *int, a, b int64, out []extent) []extent {
	out = out[:0]
	for *i < len(exts) && exts[*i].end <= a {
		*i++
	}
	for j := *i; j < len(exts) && exts[j].off < b; j++ {
		out = append(out, extent{max(exts[j].off, a), min(exts[j].end, b)})
	}
	return out
}

func (m *Manager) buffer() []byte {
	if m.buf == nil {
		m.buf = make([]byte, chunkSize)
	}
	return m.buf
}

// sums hashes the content of n chunk by chunk, up to size. The caller
// holds n.mu and m.bufMu.
func (m *Manager) contentSums(n *Node, size int64, sums []uint64) ([]uint64, error) {
	exts, err := dataExtents(n.content, size, nil)
	if err != nil {
		return nil, err
	}
	buf := m.buffer()
	nch := int((size + chunkSize - 1) / chunkSize)
	sums = sums[:0]
	var i int
	var in []extent
	for c := 0; c < nch; c++ {
		a := int64(c) * chunkSize
		b := min(a+chunkSize, size)
		in = within(exts, &i, a, b, in)
		if len(in) == 0 {
			sums = append(sums, holeSum)
			continue
		}
		if _, err := unix.Pread(n.content, buf[:b-a], a); err != nil {
			return nil, err
		}
		sums = append(sums, chunkSum(buf[:b-a], in))
	}
	return sums, nil
}

// resum recomputes n's sums from its content (which LKL now holds). The
// caller holds n.mu.
func (m *Manager) resum(n *Node, size int64) {
	m.bufMu.Lock()
	defer m.bufMu.Unlock()
	sums, err := m.contentSums(n, size, n.sums)
	if err != nil {
		sums = nil // every chunk will be written next time
	}
	n.sums = sums
}

// fill loads n's content from its LKL file, whose stat is st. The caller
// holds n.mu.
func (m *Manager) fill(n *Node, st *lkl.Stat64) error {
	if m.copied(n, st) {
		return m.filled(n, st)
	}
	if st.Size > 0 && st.Size <= chunkSize {
		if err := m.fillSmall(n, st); err != nil {
			return err
		}
		return m.filled(n, st)
	}
	if st.Size == 0 {
		// An empty file (every file a guest creates): the content need
		// only be empty, as a new one is.
		var hs unix.Stat_t
		if err := unix.Fstat(n.content, &hs); err != nil {
			return err
		}
		if hs.Size != 0 {
			if err := unix.Ftruncate(n.content, 0); err != nil {
				return err
			}
		}
		n.sums = n.sums[:0]
		return m.filled(n, st)
	}
	// A reload writes over the content in place and punches its holes:
	// truncating it to 0 first also discarded the private copies that
	// processes mapping the file had made of its pages (the kernel zaps
	// even copy-on-write pages beyond the end of a file), and a program
	// whose libraries' relocated pages went back to the file's bytes
	// crashed (a Python that ran sync, then a program).
	var hs unix.Stat_t
	reload := unix.Fstat(n.content, &hs) == nil && hs.Size > 0
	if !reload {
		if err := unix.Ftruncate(n.content, 0); err != nil {
			return err
		}
	}
	hole := func(from, to int64) error {
		if !reload || to <= from {
			return nil
		}
		return unix.Fallocate(n.content, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
	}
	m.bufMu.Lock()
	buf := m.buffer()
	// A file that is data throughout, copied in whole chunks, has its
	// sums from the buffer as each chunk goes by, as fillSmall's; else
	// resum reads the content back (holes change a chunk's sum).
	whole, sums := true, n.sums[:0]
	err := func() error {
		for pos := int64(0); pos < st.Size; {
			off, le := lkl.Syscall6(lkl.SysLseek, uintptr(n.lklfd), uintptr(pos), unix.SEEK_DATA, 0, 0, 0)
			if le == unix.ENXIO {
				whole = false
				return hole(pos, st.Size)
			}
			if le != 0 {
				// No SEEK_DATA: copy it all.
				off = uintptr(pos)
			}
			if err := hole(pos, int64(off)); err != nil {
				return err
			}
			whole = whole && off == 0
			end := st.Size
			if le == 0 {
				if h, he := lkl.Syscall6(lkl.SysLseek, uintptr(n.lklfd), off, unix.SEEK_HOLE, 0, 0, 0); he == 0 {
					end = min(int64(h), st.Size)
				}
			}
			for o := int64(off); o < end; {
				want := min(int64(len(buf)), end-o)
				k, le := lkl.Syscall6(lkl.SysPread64, uintptr(n.lklfd), lkl.Ptr(buf), uintptr(want), uintptr(o), 0, 0)
				if le != 0 {
					return le
				}
				if k == 0 {
					whole = false
					return nil // shorter than its stat said
				}
				if _, err := unix.Pwrite(n.content, buf[:k], o); err != nil {
					return err
				}
				if whole = whole && o%chunkSize == 0 && int64(k) == want && (want == chunkSize || o+want == st.Size); whole {
					sums = append(sums, chunkSum(buf[:k], []extent{{o, o + int64(k)}}))
				}
				o += int64(k)
			}
			pos = end
		}
		return nil
	}()
	m.bufMu.Unlock()
	if err != nil {
		return err
	}
	if err := unix.Ftruncate(n.content, st.Size); err != nil {
		return err
	}
	if whole && int64(len(sums)) == (st.Size+chunkSize-1)/chunkSize {
		n.sums = sums
	} else {
		m.resum(n, st.Size)
	}
	return m.filled(n, st)
}

// copied fills n's content, a first time, with the file's bytes straight
// from the image's blocks (CopyFile), with no LKL read; a read-only
// filesystem's file needs no sums, as nothing writes it back, and a
// writable one's are read back from the content. False when it could
// not; the content is then as empty as it was. The caller holds n.mu.
func (m *Manager) copied(n *Node, st *lkl.Stat64) bool {
	if m.CopyFile == nil || st.Size <= 0 {
		return false
	}
	var hs unix.Stat_t
	if unix.Fstat(n.content, &hs) != nil || hs.Size != 0 || unix.Ftruncate(n.content, st.Size) != nil {
		return false
	}
	if !m.CopyFile(n.lklfd, st, n.content) {
		unix.Ftruncate(n.content, 0)
		return false
	}
	n.sums = n.sums[:0]
	if !n.fs.ro {
		m.resum(n, st.Size)
	}
	return true
}

// fillSmall loads a file of one chunk at most with one LKL read (a hole
// reads as zeros) and one write, where the general path asks LKL where
// the data lies first and reads the content back to sum it: a chunk
// written whole is data throughout, so its sum comes from the buffer.
// Most files a program opens are this small. The caller holds n.mu.
func (m *Manager) fillSmall(n *Node, st *lkl.Stat64) error {
	m.bufMu.Lock()
	defer m.bufMu.Unlock()
	buf := m.buffer()[:st.Size]
	k := 0
	for k < len(buf) {
		r, le := lkl.Syscall6(lkl.SysPread64, uintptr(n.lklfd), lkl.Ptr(buf[k:]), uintptr(len(buf)-k), uintptr(k), 0, 0)
		if le != 0 {
			return le
		}
		if r == 0 {
			break // shorter than its stat said
		}
		k += int(r)
	}
	if _, err := unix.Pwrite(n.content, buf[:k], 0); err != nil {
		return err
	}
	// The content may be longer (a reload) or shorter than the stat.
	if err := unix.Ftruncate(n.content, st.Size); err != nil {
		return err
	}
	if k < len(buf) {
		sums, err := m.contentSums(n, st.Size, n.sums)
		if err != nil {
			sums = nil
		}
		n.sums = sums
		return nil
	}
	n.sums = append(n.sums[:0], chunkSum(buf, []extent{{0, st.Size}}))
	return nil
}

// filled ends a fill: the content's times and the node's synced state.
func (m *Manager) filled(n *Node, st *lkl.Stat64) error {
	// The content's times start as LKL's, so that reads update its
	// access time as they would LKL's (see propagateAtime).
	ts := [2]unix.Timespec{{Sec: st.Atime, Nsec: int64(st.AtimeNsec)}, {Sec: st.Mtime, Nsec: int64(st.MtimeNsec)}}
	futimens(n.content, &ts)
	var hs unix.Stat_t
	if err := unix.Fstat(n.content, &hs); err != nil {
		return err
	}
	n.err = nil
	n.atime = hs.Atim
	n.atimeDue.Store(readsShow(n, st))
	m.markSynced(n, st, hs.Ctim)
	return nil
}

// propagateAtime gives LKL's inode the access time that guests' native
// reads gave the content file. The content's change time is the fill's,
// so the host's relatime updates it on the first read after every fill;
// LKL's own rule decides whether the image's inode takes it, as a read
// through LKL would, and with the same effect: one byte read through an
// fd without O_NOATIME (utimensat would also set the change time, which a
// read leaves). The access time is then that read's, not the guest's.
// st is LKL's stat of the inode taken since the last change kbox made to
// it (a stat's own), or nil. The caller holds n.mu.
func (m *Manager) propagateAtime(n *Node, hs *unix.Stat_t, st *lkl.Stat64) {
	if hs.Atim == n.atime || n.fs.ro || n.fs.noatime {
		return
	}
	n.atime = hs.Atim
	if st == nil {
		if fst, err := lkl.Fstat(n.lklfd); err == nil {
			st = &fst
		}
	}
	if st != nil && n.fs.relatime && relatimeSkips(st, hs.Atim) {
		n.atimeDue.Store(false)
		return // the common case of a file read before: LKL is unchanged
	}
	if n.lklfl == 0 {
		return // flags unknown (takeLKLFd failed): leave LKL as it is
	}
	n.atimeDue.Store(false)
	m.writeBacks.Add(1)
	lkl.Syscall6(lkl.SysFcntl, uintptr(n.lklfd), unix.F_SETFL, uintptr(n.lklfl&^unix.O_NOATIME), 0, 0, 0)
	m.bufMu.Lock()
	lkl.Syscall6(lkl.SysPread64, uintptr(n.lklfd), lkl.Ptr(m.buffer()[:1]), 1, 0, 0, 0)
	m.bufMu.Unlock()
	lkl.Syscall6(lkl.SysFcntl, uintptr(n.lklfd), unix.F_SETFL, uintptr(n.lklfl), 0, 0, 0)
	fst, err := lkl.Fstat(n.lklfd)
	m.atimes.gave(n.key, unix.Timespec{Sec: fst.Atime, Nsec: int64(fst.AtimeNsec)}, err == nil) // atime.go
}

// closedRead gives LKL's inode, at the close of fd, a plain description
// of n's content, the access time the guest's reads through it gave the
// content, when LKL's rule takes one (n.atimeDue): natively a read pays
// for its access time, and here the reader's close does, not the next
// stat of the file (git status after the files were read).
func (m *Manager) closedRead(n *Node, fd int) {
	var hs unix.Stat_t
	if unix.Fstat(fd, &hs) != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rw || n.lklfd < 0 || hs.Atim == n.atime {
		return // a writer's node shows the content's time (overlay)
	}
	lkl.AsRoot(func() { m.propagateAtime(n, &hs, nil) })
}

// relatimeSkips tells whether Linux's relatime rule leaves an inode with
// times st alone at a read at now: its access time is later than both its
// modification and change times, and less than a day old.
func relatimeSkips(st *lkl.Stat64, now unix.Timespec) bool {
	after := func(s, ns int64, ts, tns int64) bool { return s > ts || s == ts && ns > tns }
	at, atn := st.Atime, int64(st.AtimeNsec)
	return after(at, atn, st.Mtime, int64(st.MtimeNsec)) &&
		after(at, atn, st.Ctime, int64(st.CtimeNsec)) &&
		now.Sec-at < 24*60*60
}

// TimesSet tells n that the guest set its inode's times in LKL
// (utimensat): the content's atime and mtime follow, so that the host
// decides about access times on reads as LKL would. That waits until no
// writer holds the node (a native write racing with it could not be told
// from it): it is done now if none does, else when a look finds none (the
// next handout of the node, the flusher, exit).
func (m *Manager) TimesSet(n *Node) {
	n.mu.Lock()
	n.timesSet = true
	n.mu.Unlock()
	m.settleTimes(n, 0)
}

// settleTimes mirrors times set with utimensat if no writer holds n; own
// is how many of n's busy holds are the caller's. A write lease tells at
// once that nothing holds n (leaseHeld); else a look at n's holders tells
// a reader from a writer.
func (m *Manager) settleTimes(n *Node, own int) {
	if m.Holders == nil {
		return
	}
	if !m.noLeases.Load() {
		m.mu.Lock()
		free := n.busy == own && !m.leaseHeld(n)
		m.mu.Unlock()
		if free {
			m.settled(n, holds{})
			return
		}
	}
	hs := m.scanFor(n)
	m.settled(n, hs[n])
}

// mirrorTimes gives the content LKL's atime and mtime. The caller holds
// n.mu, and no writable description of n exists.
func (m *Manager) mirrorTimes(n *Node) {
	n.timesSet = false
	var cs unix.Stat_t
	if n.content < 0 || unix.Fstat(n.content, &cs) != nil || cs.Ctim != n.synced || n.wroteSince.Load() {
		return // not written back: the next write-back sets the times
	}
	st, err := lkl.Fstat(n.lklfd)
	if err != nil {
		return
	}
	ts := [2]unix.Timespec{{Sec: st.Atime, Nsec: int64(st.AtimeNsec)}, {Sec: st.Mtime, Nsec: int64(st.MtimeNsec)}}
	var hs unix.Stat_t
	if futimens(n.content, &ts) != nil || unix.Fstat(n.content, &hs) != nil {
		return
	}
	n.atime = hs.Atim
	m.markSynced(n, &st, hs.Ctim)
}

// markSynced records that LKL's inode (now st) holds n's content as of the
// content's change time ctime. The caller holds n.mu.
func (m *Manager) markSynced(n *Node, st *lkl.Stat64, ctime unix.Timespec) error {
	n.lkl = versionOf(st)
	n.synced = ctime
	alloc := st.Blocks * 512
	n.fs.adjust(m, alloc-n.alloc)
	n.alloc = alloc
	return nil
}

// mayBeDirty reports whether n's content may hold what LKL does not. The
// caller holds n.mu.
func (m *Manager) mayBeDirty(n *Node) bool {
	if !n.rw {
		return false // only kbox changes a node no writer opened
	}
	var hs unix.Stat_t
	if unix.Fstat(n.content, &hs) != nil {
		return true
	}
	return n.wroteSince.Load() || hs.Ctim != n.synced || recent(n.synced)
}

// recent reports a change time close enough to now that a write since
// may have left it as it was: kernels before 6.13 stamp tmpfs files with
// the clock tick's time, so only a later tick shows a change.
func recent(ts unix.Timespec) bool {
	return time.Since(time.Unix(ts.Sec, ts.Nsec)) < 50*time.Millisecond
}

// writeBack writes n's content to LKL where it differs, and returns the
// content's size. The caller holds n.mu. A failure is kept in n.err (and
// returned).
func (m *Manager) writeBack(n *Node) (int64, error) {
	if n.content < 0 {
		return 0, nil
	}
	var hs unix.Stat_t
	if err := unix.Fstat(n.content, &hs); err != nil {
		return 0, err
	}
	m.propagateAtime(n, &hs, nil)
	if !n.rw {
		return hs.Size, nil
	}
	if !n.wroteSince.Load() && hs.Ctim == n.synced && !recent(n.synced) {
		return hs.Size, n.err
	}
	m.writeBacks.Add(1)
	defer m.writeBacks.Add(1)
	m.atimes.changes.Add(1)
	defer m.atimes.changes.Add(1)
	wrote, err := m.copyOut(n, hs.Size)
	if err != nil {
		n.err = err
		n.fs.failed(err)
		return hs.Size, err
	}
	if wrote {
		// LKL's modification time is the content's: the time of the
		// guest's last write, not of the write-back. (Nothing written:
		// times set since, by utimensat, stay.)
		ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, hs.Mtim}
		lklFutimens(n.lklfd, &ts)
	}
	st, ferr := lkl.Fstat(n.lklfd)
	if ferr != nil {
		n.err = ferr
		return hs.Size, ferr
	}
	n.err = nil
	return hs.Size, m.markSynced(n, &st, hs.Ctim)
}

// copyOut writes the chunks of n's content (size bytes) that LKL lacks;
// wrote says whether it changed anything.
func (m *Manager) copyOut(n *Node, size int64) (wrote bool, err error) {
	if size != n.lkl.size {
		if _, le := lkl.Syscall6(lkl.SysFtruncate, uintptr(n.lklfd), uintptr(size), 0, 0, 0, 0); le != 0 {
			return false, le
		}
		n.lkl.size = size
		trimSums(n, size)
		wrote = true
	}
	exts, err := dataExtents(n.content, size, nil)
	if err != nil {
		return wrote, err
	}
	m.bufMu.Lock()
	defer m.bufMu.Unlock()
	buf := m.buffer()
	nch := int((size + chunkSize - 1) / chunkSize)
	var i int
	var in []extent
	for c := 0; c < nch; c++ {
		a := int64(c) * chunkSize
		b := min(a+chunkSize, size)
		in = within(exts, &i, a, b, in)
		sum := uint64(holeSum)
		if len(in) > 0 {
			if _, err := unix.Pread(n.content, buf[:b-a], a); err != nil {
				return wrote, err
			}
			sum = chunkSum(buf[:b-a], in)
		}
		if c < len(n.sums) && n.sums[c] == sum {
			continue
		}
		if err := writeChunk(n.lklfd, buf[:b-a], a, in); err != nil {
			return wrote, err
		}
		wrote = true
		if c < len(n.sums) {
			n.sums[c] = sum
		} else {
			for len(n.sums) < c {
				n.sums = append(n.sums, ^uint64(0))
			}
			n.sums = append(n.sums, sum)
		}
	}
	return wrote, nil
}

// writeChunk writes the data ranges in of a chunk (buf holds [a, a+len))
// to LKL fd fd and punches holes where it has none.
func writeChunk(fd int, buf []byte, a int64, in []extent) error {
	b := a + int64(len(buf))
	pos := a
	for _, r := range append(in, extent{b, b}) {
		if r.off > pos {
			if err := punch(fd, pos, r.off-pos); err != nil {
				return err
			}
		}
		for o := r.off; o < r.end; {
			k, le := lkl.Syscall6(lkl.SysPwrite64, uintptr(fd), lkl.Ptr(buf[o-a:]), uintptr(r.end-o), uintptr(o), 0, 0)
			if le != 0 {
				return le
			}
			o += int64(k)
		}
		pos = max(pos, r.end)
	}
	return nil
}

// punch makes [off, off+n) a hole in LKL fd fd; where the filesystem
// cannot punch, it writes zeros.
func punch(fd int, off, n int64) error {
	const mode = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	_, le := lkl.Syscall6(lkl.SysFallocate, uintptr(fd), mode, uintptr(off), uintptr(n), 0, 0)
	if le == 0 {
		return nil
	}
	if le != unix.EOPNOTSUPP && le != unix.ENOSYS {
		return le
	}
	zero := make([]byte, min(n, chunkSize))
	for o := off; o < off+n; {
		k, le := lkl.Syscall6(lkl.SysPwrite64, uintptr(fd), lkl.Ptr(zero), uintptr(min(int64(len(zero)), off+n-o)), uintptr(o), 0, 0)
		if le != 0 {
			return le
		}
		o += int64(k)
	}
	return nil
}

// Sync writes n back and returns any write-back error not reported yet
// (which it clears: the guest call that gets it reports it).
func (m *Manager) Sync(n *Node) error {
	_, err := m.flush(n)
	n.mu.Lock()
	if err == nil {
		err = n.err
	}
	n.err = nil
	n.mu.Unlock()
	return err
}

// Fsync is fsync (or fdatasync) of a guest description of n: a write-back,
// then LKL's own fsync of the inode, so the data is in the image when it
// returns.
func (m *Manager) Fsync(n *Node, data bool) error {
	if err := m.Sync(n); err != nil {
		return err
	}
	nr := uintptr(lkl.SysFsync)
	if data {
		nr = lkl.SysFdatasync
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lklfd < 0 {
		return nil
	}
	if _, le := lkl.Syscall6(nr, uintptr(n.lklfd), 0, 0, 0, 0, 0); le != 0 {
		return le
	}
	return nil
}

// SyncRange is sync_file_range of a guest description of n: a write-back
// (the content is n's page cache), then LKL's own sync_file_range of the
// range with the guest's flags, which starts or waits for the writing of
// LKL's pages to the image as Linux's does for its own (no flush of the
// disk's cache: fsync is what makes data durable).
func (m *Manager) SyncRange(n *Node, off, nbytes int64, flags int) error {
	if err := m.Sync(n); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lklfd < 0 {
		return nil
	}
	if _, le := lkl.Syscall6(lkl.SysSyncFileRange, uintptr(n.lklfd), uintptr(off), uintptr(nbytes), uintptr(flags), 0, 0); le != 0 {
		return le
	}
	return nil
}

// flush writes n back, keeping a failure in n.err, and returns the
// content's size. Write-backs are kbox's own work: as root, whatever guest
// the calling thread serves.
func (m *Manager) flush(n *Node) (size int64, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	lkl.AsRoot(func() { size, err = m.writeBack(n) })
	return size, err
}

// SyncInode writes back the node of LKL inode (dev, ino), if it has one:
// before kbox reads the file through LKL.
func (m *Manager) SyncInode(dev, ino uint64) error {
	if n := m.OfInode(dev, ino); n != nil {
		_, err := m.flush(n)
		return err
	}
	return nil
}

// FlushAll writes every node back (sync(2), a session's checkpoint),
// keeping errors for the calls that report them. The nodes a writer may
// have written go first, as the flusher's do (flushHot): one that no
// writer holds any more is then not hot, and the next write-back of it
// with nothing written since is a stat, where a hot node's is a hash of
// its whole content (a checkpoint right after a sync).
func (m *Manager) FlushAll() error {
	var first error
	hot := m.flushHot()
	for _, err := range hot {
		if err != nil && first == nil {
			first = err
		}
	}
	m.mu.Lock()
	nodes := make([]*Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		if _, ok := hot[n]; !ok {
			nodes = append(nodes, n)
		}
	}
	m.mu.Unlock()
	for _, n := range nodes {
		if _, err := m.flush(n); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// SyncAll writes back every node of LKL filesystem dev (syncfs(2); 0: all)
// and returns the first error not reported yet.
func (m *Manager) SyncAll(dev uint64) error {
	m.mu.Lock()
	nodes := make([]*Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		if dev == 0 || n.key.dev == dev {
			nodes = append(nodes, n)
		}
	}
	m.mu.Unlock()
	var first error
	for _, n := range nodes {
		if err := m.Sync(n); err != nil && first == nil {
			first = err
		}
	}
	m.mu.Lock()
	for d, fs := range m.fss {
		if dev == 0 || d == dev {
			if err := fs.takeErr(); err != nil && first == nil {
				first = err
			}
		}
	}
	m.mu.Unlock()
	return first
}

// WriteBackCounter returns the counter WriteBacks reads, for code that
// compares it without calling (an in-process tier's C entry,
// dispatch/hint.go).
func (m *Manager) WriteBackCounter() *atomic.Uint64 { return &m.writeBacks }
