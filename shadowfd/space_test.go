package shadowfd

import (
	"testing"
	"time"
)

// TestPendingFrees: a new node waits for the blocks of removed files only
// when there are more of them than the band the content store's size may
// lag by anyway, and only until their tick has passed.
func TestPendingFrees(t *testing.T) {
	now := time.Unix(1000, 0)
	soon, past := now.Add(40*time.Millisecond), now.Add(-time.Millisecond)
	for _, c := range []struct {
		name  string
		pend  int64
		until time.Time
		want  int
	}{
		{"nothing removed", 0, soon, freesNone},
		{"a compiler's temporary file", 30 << 10, soon, freesForgiven},
		{"just the slack", pendSlack, soon, freesForgiven},
		{"one byte more", pendSlack + 1, soon, freesAwait},
		{"a big file", 80 << 20, soon, freesAwait},
		{"a big file, its tick passed", 80 << 20, past, freesDone},
		{"a small file, its tick passed", 4 << 10, past, freesDone},
		{"at the deadline", 80 << 20, now, freesDone},
	} {
		if got := pendingFrees(c.pend, now, c.until); got != c.want {
			t.Errorf("%s: pendingFrees(%d) = %d, want %d", c.name, c.pend, got, c.want)
		}
	}
}
