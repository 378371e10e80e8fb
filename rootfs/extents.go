package rootfs

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Reading a file of the image from its blocks.
//
// A file's bytes are the blocks its extents name on the disk, once
// nothing in the kernel holds newer ones: on a read-only mount of a
// plain image (a whole-disk ext4, no injected faults), and on a writable
// one for a file unchanged since the mount. CopyFile copies them there,
// by the host kernel (sendfile from the image file's, or the
// copy-on-write layer's, page cache), instead of LKL reading them into
// its page cache through the virtual disk, a copy out of it and a write
// into the memfd: an exec's first read of python3 (6.8 MB, cold) took
// 16–19 ms through LKL on a 2-vCPU VM under PVM, where this copy takes
// about 3.
//
// On a writable mount, "unchanged since the mount" is the file's change
// time before the kernel's clock at the mount (since, in whole seconds:
// unchanged): every change to a file's bytes or blocks (a write, a
// truncate, a hole punched or allocated) sets its change time from that
// clock, which only kbox sets, once, before the mount (setClock; guests
// may not), and which then runs on the host's monotonic clock (ext4's
// ioctls that move a file's blocks without it are not passed to LKL:
// dispatch/sys_io_ioctl.go). The time is checked again after the copy: a
// file changed meanwhile, whose blocks may have been freed and taken by
// another, is refused, and the caller reads it through LKL, which
// rewrites the whole copy.

// extentBatch is how many extents one FIEMAP asks for.
const extentBatch = 64

// setDirect notes, after the root's mount, whether its files may be read
// from their blocks (CopyFile), and from when a writable mount's files
// have changed.
func (r *Root) setDirect(opt Options) {
	if r.faulty || opt.Partition != 0 || !extFamily(opt.FSType) {
		return
	}
	st, err := lkl.Stat(r.MountPoint, false)
	if err != nil {
		return
	}
	if !opt.ReadOnly {
		if r.since, err = lkl.CoarseNow(); err != nil {
			return
		}
	}
	r.direct, r.rootDev = true, st.Dev
}

// endDirect stops CopyFile, once no copy is under way: the image file
// and the kernel are about to go.
func (r *Root) endDirect() {
	r.directMu.Lock()
	r.direct = false
	r.directMu.Unlock()
}

// unchanged says whether the file of stat st has not changed since the
// mount of a writable root: its change time is in a second before the
// mount's. Whole seconds are a margin: an inode of 128 bytes keeps only
// the seconds of its times on the disk.
func (r *Root) unchanged(st *lkl.Stat64) bool {
	return st.Ctime < r.since.Sec
}

// CopyFile writes the bytes of the file open at LKL fd lfd (st its stat,
// on the image's root mount) into dst, a file of st.Size zero bytes,
// from the image's blocks. False where it cannot: a mount it does not
// apply to (setDirect), another filesystem (/tmp's disk), a file changed
// since a writable mount, an extent that is not plainly the file's bytes
// (inline data, encrypted, not allocated) or lies outside the image; dst
// may then be partly written and the caller reads the file through LKL.
// On a writable mount a copy gives the file its access time as the
// caller's read through lfd would have (none if lfd is O_NOATIME).
func (r *Root) CopyFile(lfd int, st *lkl.Stat64, dst int) bool {
	if r == nil {
		return false
	}
	// Close waits for a copy under way, and none starts after it.
	r.directMu.RLock()
	defer r.directMu.RUnlock()
	if !r.direct || st.Dev != r.rootDev || st.Size <= 0 || !r.opt.ReadOnly && !r.unchanged(st) {
		return false
	}
	if !r.copyExtents(lfd, uint64(st.Size), dst) {
		return false
	}
	if r.opt.ReadOnly {
		return true
	}
	now, err := lkl.Fstat(lfd)
	if err != nil || !r.unchanged(&now) || now.Size != st.Size {
		return false
	}
	if fl, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lfd), unix.F_GETFL, 0, 0, 0, 0); le == 0 && fl&unix.O_NOATIME == 0 {
		lkl.Syscall6(lkl.SysPread64, uintptr(lfd), lkl.Ptr(make([]byte, 1)), 1, 0, 0, 0)
	}
	return true
}

// copyExtents copies the size bytes of the file at lfd to dst by its
// extents.
func (r *Root) copyExtents(lfd int, size uint64, dst int) bool {
	for next := uint64(0); next < size; {
		ext, err := lkl.Extents(lfd, next, extentBatch)
		if err != nil {
			return false
		}
		if len(ext) == 0 {
			return true // holes to the end: dst's zeros
		}
		for _, x := range ext {
			if x.Flags&^(lkl.ExtentLast|lkl.ExtentUnwritten|lkl.ExtentMerged) != 0 || x.Length == 0 || x.Logical+x.Length < x.Logical || x.Logical+x.Length <= next {
				return false
			}
			if x.Logical >= size {
				return true
			}
			n := min(x.Logical+x.Length, size) - x.Logical
			if x.Flags&lkl.ExtentUnwritten == 0 && !r.copyBlocks(dst, int64(x.Logical), x.Physical, n) {
				return false
			}
			next = x.Logical + x.Length
			if x.Flags&lkl.ExtentLast != 0 {
				return true
			}
		}
	}
	return true
}

// copyBlocks copies n bytes at offset from of the disk to offset at of
// dst: from the image file, or on a copy-on-write disk from the layers
// holding them (lkl.Disk.COWRun).
func (r *Root) copyBlocks(dst int, at int64, from, n uint64) bool {
	size := uint64(r.Image.Size)
	if r.opt.Overlay == nil {
		return copyAt(dst, at, int(r.Image.File.Fd()), from, n, size)
	}
	for n > 0 {
		if from+n < from || from+n > size {
			return false
		}
		fd, run := r.Disk.COWRun(int64(from), int64(n))
		if fd < 0 || run <= 0 || uint64(run) > n || !copyAt(dst, at, fd, from, uint64(run), size) {
			return false
		}
		at, from, n = at+run, from+uint64(run), n-uint64(run)
	}
	return true
}

// copyAt copies n bytes at offset from of file src (of srcSize bytes) to
// offset at of dst.
func copyAt(dst int, at int64, src int, from, n, srcSize uint64) bool {
	if from+n < from || from+n > srcSize {
		return false
	}
	if _, err := unix.Seek(dst, at, 0); err != nil {
		return false
	}
	off := int64(from)
	for left := int(n); left > 0; {
		c, err := unix.Sendfile(dst, src, &off, left)
		if err == unix.EINTR {
			continue
		}
		if err != nil || c == 0 {
			return false
		}
		left -= c
	}
	return true
}
