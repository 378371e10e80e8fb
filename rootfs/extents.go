package rootfs

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Reading a file of a read-only image from its blocks.
//
// On a read-only mount of a plain image (a whole-disk ext4, no overlay,
// no injected faults) nothing writes the filesystem: a file's bytes are
// the blocks its extents name in the image file. CopyFile copies them
// there, by the host kernel (sendfile from the image file's page cache),
// instead of LKL reading them into its page cache through the virtual
// disk, a copy out of it and a write into the memfd: an exec's first read
// of python3 (6.8 MB, cold) took 16–19 ms through LKL on a 2-vCPU VM
// under PVM, where this copy takes about 3.

// extentBatch is how many extents one FIEMAP asks for.
const extentBatch = 64

// setDirect notes, after the root's mount, whether its files may be read
// from their blocks (CopyFile).
func (r *Root) setDirect(opt Options) {
	if !opt.ReadOnly || opt.Overlay != nil || r.faulty || opt.Partition != 0 || !extFamily(opt.FSType) {
		return
	}
	st, err := lkl.Stat(r.MountPoint, false)
	if err != nil {
		return
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

// CopyFile writes the bytes of the file open at LKL fd lfd (st its stat,
// on the image's root mount) into dst, a file of st.Size zero bytes,
// from the image's blocks. False where it cannot: a mount it does not
// apply to (setDirect), another filesystem (/tmp's disk), an extent that
// is not plainly the file's bytes (inline data, encrypted, not allocated)
// or lies outside the image; dst may then be partly written and the
// caller reads the file through LKL.
func (r *Root) CopyFile(lfd int, st *lkl.Stat64, dst int) bool {
	if r == nil {
		return false
	}
	// Close waits for a copy under way, and none starts after it.
	r.directMu.RLock()
	defer r.directMu.RUnlock()
	if !r.direct || st.Dev != r.rootDev || st.Size <= 0 {
		return false
	}
	size := uint64(st.Size)
	img := int(r.Image.File.Fd())
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
			if x.Flags&lkl.ExtentUnwritten == 0 && !copyAt(dst, int64(x.Logical), img, x.Physical, n, uint64(r.Image.Size)) {
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
