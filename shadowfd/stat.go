package shadowfd

import (
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// What a guest's stat of a shadowed file shows: LKL's inode, with what
// the node's content has that LKL does not yet (its size, blocks and
// times, a read's access time), and truncations through a path, which
// every description of the node must see.

// Stat gives the guest's view of n's inode: LKL's stat, with the size,
// blocks and times of the content where it is newer.
func (m *Manager) Stat(n *Node, st *lkl.Stat64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lklfd < 0 {
		return unix.EBADF
	}
	fst, err := lkl.Fstat(n.lklfd)
	if err != nil {
		return err
	}
	*st = fst
	m.overlay(n, st)
	return nil
}

// Overlay corrects an LKL stat of an image file that has a node: its
// content's size, blocks and modification times when it holds what LKL
// has not yet, and its access time when guests read it since. It costs
// one lookup while any node exists, and nothing otherwise.
//
// The caller's stat was taken without the node's lock, so a write-back may
// have ended between it and now: LKL then has the content, the node says
// so, and the caller's stat (of before the write-back: a file truncated by
// an open, size 0) would go out as it is. So the inode of a node a writer
// opened is stat'ed again under the lock, where LKL and the node's state
// agree (a node nobody opened for writing never differs from LKL).
func (m *Manager) Overlay(st *lkl.Stat64) {
	n := m.OfInode(st.Dev, st.Ino)
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.rw && n.lklfd >= 0 {
		if fst, err := lkl.Fstat(n.lklfd); err == nil && fst.Dev == st.Dev && fst.Ino == st.Ino {
			*st = fst
		}
	}
	m.overlay(n, st)
	n.mu.Unlock()
}

// overlay is Overlay for n; the caller holds n.mu.
func (m *Manager) overlay(n *Node, st *lkl.Stat64) {
	if !n.rw && !readsShow(n, st) {
		return // LKL has it all, and no read changes it
	}
	var hs unix.Stat_t
	if n.content < 0 || unix.Fstat(n.content, &hs) != nil {
		return
	}
	// A read since the last look, unless LKL's rule leaves the inode
	// alone. A node no writer opened gives it to LKL now (the next stats
	// need not look), and shows LKL's.
	if hs.Atim != n.atime && !(n.fs.relatime && relatimeSkips(st, hs.Atim)) {
		if !n.rw {
			lkl.AsRoot(func() { m.propagateAtime(n, &hs, st) })
			if fst, err := lkl.Fstat(n.lklfd); err == nil {
				st.Atime, st.AtimeNsec = fst.Atime, fst.AtimeNsec
			}
			return
		}
		st.Atime, st.AtimeNsec = hs.Atim.Sec, uint64(hs.Atim.Nsec)
	}
	if !n.rw || hs.Ctim == n.synced && !n.wroteSince.Load() && !recent(n.synced) {
		return // LKL has the content (a change time of the last tick proves nothing)
	}
	st.Size = hs.Size
	if hs.Ctim != n.synced {
		st.Blocks = hs.Blocks
		st.Mtime, st.MtimeNsec = hs.Mtim.Sec, uint64(hs.Mtim.Nsec)
		st.Ctime, st.CtimeNsec = hs.Ctim.Sec, uint64(hs.Ctim.Nsec)
	}
}

// readsShow reports whether a guest's read of n may change its stat: not
// on a read-only or noatime mount, nor under relatime once LKL's inode
// (st) has its access time after its last change, for a day.
func readsShow(n *Node, st *lkl.Stat64) bool {
	if n.fs.ro || n.fs.noatime {
		return false
	}
	return !n.fs.relatime || !relatimeSkips(st, unix.NsecToTimespec(time.Now().UnixNano()))
}

// Truncated tells the node of LKL inode st (if any) that LKL truncated it to
// st.Size through a path: every description sees the new size.
func (m *Manager) Truncated(st *lkl.Stat64) error {
	n := m.OfInode(st.Dev, st.Ino)
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var err error
	lkl.AsRoot(func() { err = m.truncated(n, st.Size) })
	return err
}

// truncated makes n's content and its LKL inode size bytes. LKL's is
// truncated (again: a write-back since the guest's truncation may have
// written older content), then the content; content not written back yet
// below size stays to be written. The caller holds n.mu.
func (m *Manager) truncated(n *Node, size int64) error {
	dirty := m.mayBeDirty(n)
	if n.rw {
		if _, le := lkl.Syscall6(lkl.SysFtruncate, uintptr(n.lklfd), uintptr(size), 0, 0, 0, 0); le != 0 {
			return le
		}
	}
	st, err := lkl.Fstat(n.lklfd)
	if err != nil {
		return err
	}
	if err := unix.Ftruncate(n.content, size); err != nil {
		return err
	}
	if dirty {
		n.lkl = versionOf(&st)
		trimSums(n, size)
		return nil
	}
	m.resum(n, size)
	var hs unix.Stat_t
	if err := unix.Fstat(n.content, &hs); err != nil {
		return err
	}
	return m.markSynced(n, &st, hs.Ctim)
}

// trimSums drops the sums of chunks beyond size and marks the last, cut
// one as unknown.
func trimSums(n *Node, size int64) {
	if nch := int((size + chunkSize - 1) / chunkSize); nch < len(n.sums) {
		n.sums = n.sums[:nch]
	}
	if last := int(size / chunkSize); size%chunkSize != 0 && last < len(n.sums) {
		n.sums[last] = ^uint64(0)
	}
}
