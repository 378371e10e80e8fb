package dispatch

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// sysfsMagic is sysfs's f_type.
const sysfsMagic = 0x62656572

// generatedSize reports what a sysfs attribute's stat looks like: a page
// of size and no blocks. Only such files are asked for their filesystem
// (generated).
func generatedSize(st *lkl.Stat64) bool { return st.Size == 4096 && st.Blocks == 0 }

// generated reports a regular file of LKL's sysfs, open at lfd: its text
// is made at each read (a loop device's size and backing file change
// with its ioctls, its stat does not), so it is served as a virtual fd,
// read through LKL, never as a shadow, whose cached copy would go stale.
func generated(lfd int, st *lkl.Stat64) bool {
	if !generatedSize(st) {
		return false
	}
	var sf unix.Statfs_t
	if _, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(lfd), lkl.PtrOf(&sf), 0, 0, 0, 0); le != 0 {
		return false
	}
	return sf.Type == sysfsMagic
}
