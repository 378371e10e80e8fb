package shadowfd

import (
	"testing"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// TestAtimeLog: an access time given moves the access-time clock, not
// the changes; an entry older than it takes the inode's time, a newer one
// and other inodes keep theirs; a time that cannot be read, or a full
// log, moves the changes (every entry stale).
func TestAtimeLog(t *testing.T) {
	var m Manager
	c0, a0 := m.StatClocks()
	m.atimes.gave(nodeKey{1, 2}, unix.Timespec{Sec: 50, Nsec: 7}, true)
	c1, a1 := m.StatClocks()
	if c1 != c0 || a1 <= a0 {
		t.Fatalf("clocks after an access time given: changes %d -> %d, access times %d -> %d; want the second to move only", c0, c1, a0, a1)
	}
	for _, c := range []struct {
		name      string
		dev, ino  uint64
		since     uint64
		want, got int64
	}{
		{"older entry", 1, 2, a0, 50, 30},
		{"entry as new as the time", 1, 2, a1, 30, 30},
		{"other inode", 1, 3, a0, 30, 30},
		{"other device", 2, 2, a0, 30, 30},
	} {
		st := lkl.Stat64{Dev: c.dev, Ino: c.ino, Atime: c.got}
		m.AtimeSince(&st, c.since)
		if st.Atime != c.want {
			t.Errorf("%s: access time %d, want %d", c.name, st.Atime, c.want)
		}
	}
	// The same time again changes nothing: no clock moves.
	if m.atimes.gave(nodeKey{1, 2}, unix.Timespec{Sec: 50, Nsec: 7}, true) {
		t.Errorf("the time an inode was given already, given again, changed the log")
	}
	if c, a := m.StatClocks(); c != c1 || a != a1 {
		t.Errorf("the same time again moved the clocks: %d, %d; were %d, %d", c, a, c1, a1)
	}
	m.atimes.gave(nodeKey{1, 4}, unix.Timespec{}, false)
	if c2, _ := m.StatClocks(); c2 == c1 {
		t.Errorf("an access time that could not be read left the changes at %d", c1)
	}
	c3, _ := m.StatClocks()
	for i := range atimeLogMax + 1 {
		m.atimes.gave(nodeKey{9, uint64(i)}, unix.Timespec{Sec: 1}, true)
	}
	if c4, _ := m.StatClocks(); c4 == c3 || len(m.atimes.given) > atimeLogMax {
		t.Errorf("a full log: changes %d -> %d, %d entries; want them moved and at most %d", c3, c4, len(m.atimes.given), atimeLogMax)
	}
}
