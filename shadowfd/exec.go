package shadowfd

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// CopyCurrent copies the content of the node of st's inode to the start
// of dst, by the kernel (sendfile), when the node holds the version
// st describes (LKL's, after a write-back): a program whose file a guest
// opened before (a build's new binary, a program read and then run) is
// not read from LKL again. False when there is no such
// node, the content is shorter than st says, or the kernel will not copy;
// dst may then be partly written (the caller writes it whole).
func (m *Manager) CopyCurrent(st *lkl.Stat64, dst int) bool {
	if m == nil || st.Size <= 0 {
		return false
	}
	m.waitWarm(nodeKey{st.Dev, st.Ino})
	if m.count.Load() == 0 {
		return false
	}
	n := m.hold(st)
	if n == nil {
		return false
	}
	defer m.done(n)
	// Under n.mu no write-back or change of kbox's runs.
	n.mu.Lock()
	defer n.mu.Unlock()
	if versionOf(st) != n.lkl {
		return false
	}
	// sendfile, not copy_file_range: the content is often a file of the
	// store's tmpfs, and copy_file_range will not cross filesystems.
	var off int64
	if _, err := unix.Seek(dst, 0, 0); err != nil {
		return false
	}
	for off < st.Size {
		c, err := unix.Sendfile(dst, n.content, &off, int(st.Size-off))
		if err == unix.EINTR {
			continue
		}
		if err != nil || c == 0 {
			return false
		}
	}
	return true
}
