package guestpath

import (
	"testing"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// TestStatCacheFollow: a stat that follows a final symlink takes lstat's
// entry only when that entry is of no symlink; lstat never takes a
// following stat's.
func TestStatCacheFollow(t *testing.T) {
	const wb, cred = 0, 1
	reg := lkl.Stat64{Mode: unix.S_IFREG | 0o644, Ino: 7}
	link := lkl.Stat64{Mode: unix.S_IFLNK | 0o777, Ino: 8}
	for _, c := range []struct {
		name        string
		putNofollow bool
		st          lkl.Stat64
		en          unix.Errno
		getNofollow bool
		hit         bool
	}{
		{"stat after lstat of a file", true, reg, 0, false, true},
		{"lstat after lstat", true, reg, 0, true, true},
		{"stat after lstat of a symlink", true, link, 0, false, false},
		{"stat after lstat's ENOENT", true, lkl.Stat64{}, unix.ENOENT, false, false},
		{"lstat after stat of a file", false, reg, 0, true, false},
		{"stat after stat", false, reg, 0, false, true},
	} {
		var c0 StatCache
		const at = 7 // the access-time clock, given back with a hit
		c0.Put(c0.Gen(), wb, at, cred, "/a/b", c.putNofollow, &c.st, c.en)
		var got lkl.Stat64
		en, was, hit := c0.Get("/a/b", c.getNofollow, wb, cred, &got)
		if hit != c.hit {
			t.Errorf("%s: hit %v, want %v", c.name, hit, c.hit)
			continue
		}
		if hit && (en != c.en || was != at || (en == 0 && got.Ino != c.st.Ino)) {
			t.Errorf("%s: %v ino %d clock %d, want %v ino %d clock %d", c.name, en, got.Ino, was, c.en, c.st.Ino, at)
		}
		// Another path, other credentials, other changes of the
		// shadows, a new generation: no hit.
		if _, _, hit := c0.Get("/a/c", c.getNofollow, wb, cred, &got); hit {
			t.Errorf("%s: another path hit", c.name)
		}
		if _, _, hit := c0.Get("/a/b", c.getNofollow, wb, cred+1, &got); hit {
			t.Errorf("%s: other credentials hit", c.name)
		}
		if _, _, hit := c0.Get("/a/b", c.getNofollow, wb+1, cred, &got); hit {
			t.Errorf("%s: hit after a write-back", c.name)
		}
		c0.Changed()
		if _, _, hit := c0.Get("/a/b", c.getNofollow, wb, cred, &got); hit {
			t.Errorf("%s: hit after a change", c.name)
		}
	}
}
