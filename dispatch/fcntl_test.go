package dispatch

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirNotify: F_NOTIFY on a virtual fd, as Linux's fcntl_dirnotify
// with dnotify on, but for a watch itself (EINVAL: none can be set).
func TestDirNotify(t *testing.T) {
	const dnModify, dnCreate, dnDelete = 0x2, 0x4, 0x8
	for _, c := range []struct {
		arg  uint32
		dir  bool
		want unix.Errno
	}{
		{0, true, 0},
		{0x80000000, true, 0}, // DN_MULTISHOT alone: CPython's test_fcntl_64_bit
		{0x80000000, false, 0},
		{0, false, 0},
		{dnCreate, false, unix.ENOTDIR},
		{dnCreate | 0x80000000, false, unix.ENOTDIR},
		{dnCreate, true, unix.EINVAL},
		{dnModify | dnDelete | 0x80000000, true, unix.EINVAL},
	} {
		if got := dirNotify(c.arg, c.dir); got != c.want {
			t.Errorf("dirNotify(%#x, dir %v) = %v, want %v", c.arg, c.dir, got, c.want)
		}
	}
}
