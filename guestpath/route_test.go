package guestpath

import (
	"strings"
	"testing"
)

// TestUnder: a path is under a directory when it is the directory or one
// of its components follows it, never when it merely shares a prefix.
func TestUnder(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/proc", "/proc", true},
		{"/proc/self", "/proc", true},
		{"/procfs", "/proc", false},
		{"/pro", "/proc", false},
		{"/", "/", true},
		{"/etc", "/", false}, // "/"+"/" was never a prefix of a clean path
		{"//etc", "/", true},
		{"/sys/devices/system/cpu/online", CPURoute, true},
		{"", "", true},
		{"/a", "", true},
	} {
		if got := Under(c.p, c.dir); got != c.want {
			t.Errorf("Under(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
}

// FuzzUnder holds Under to the check it replaced.
func FuzzUnder(f *testing.F) {
	for _, s := range [][2]string{{"/proc/1", "/proc"}, {"/procx", "/proc"}, {"/", "/"}, {"/a/b", "/a/b/"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, dir string) {
		if got, want := Under(p, dir), p == dir || strings.HasPrefix(p, dir+"/"); got != want {
			t.Errorf("Under(%q, %q) = %v, want %v", p, dir, got, want)
		}
	})
}
