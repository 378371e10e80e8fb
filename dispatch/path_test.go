package dispatch

import "testing"

func TestLastDots(t *testing.T) {
	for _, c := range []struct {
		p    string
		want int
	}{
		{".", 1}, {"..", 2}, {"./", 1}, {"../", 2}, {"a/.", 1}, {"a/..//", 2},
		{"/", 0}, {"", 0}, {"a", 0}, {"a/.b", 0}, {"...", 0}, {"./a", 0}, {"/..", 2},
	} {
		if got := lastDots(c.p); got != c.want {
			t.Errorf("lastDots(%q) = %d, want %d", c.p, got, c.want)
		}
	}
}

func TestFromGoneDir(t *testing.T) {
	for _, c := range []struct {
		p    string
		want bool
	}{
		{"..", true}, {"../a", true}, {"./..", true}, {".//../x", true}, {"../..", true},
		{".", false}, {"./", false}, {"", false}, {"a", false}, {"a/..", false}, {"./a/../..", false}, {"...", false}, {"..a", false},
	} {
		if got := fromGoneDir(c.p); got != c.want {
			t.Errorf("fromGoneDir(%q) = %v, want %v", c.p, got, c.want)
		}
	}
}
