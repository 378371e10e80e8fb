//go:build lkl

package lkl

import (
	"os"
	"strings"
	"testing"
)

// thpMode is the bracketed word of a /sys/kernel/mm/transparent_hugepage
// setting ("never" when the file cannot be read).
func thpMode(name string) string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/" + name)
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if err != nil || i < 0 || j < i {
		return "never"
	}
	return s[i+1 : j]
}

// TestPrefault: the ends of the kernel's memory that boot writes first
// (glue.c's prefault: 3 MB at the bottom, 2 MB at the top, 4 MB from
// 128M on) are resident before the kernel runs, each end made in one
// call instead of a fault a page, and nothing between them is. Where the
// host gives transparent huge pages to those who ask and compacts memory
// for them (THP "always" or "madvise", defrag not "never" or "defer"),
// the ends' whole 2 MB pages are huge pages: the bottom's first 2 MB and
// the top; the bottom's third MB stays small pages.
func TestPrefault(t *testing.T) {
	mode, defrag := thpMode("enabled"), thpMode("defrag")
	huge := mode != "never" && defrag != "never" && defrag != "defer"
	if !huge {
		t.Logf("THP %q, defrag %q: small pages expected", mode, defrag)
	}
	for _, c := range []struct {
		mb, ends, hugeMB int // the memory's size, the MiB populated, of them in huge pages where the host gives them
	}{
		{8, 0, 0}, // too small: left to boot's faults
		{32, 5, 4},
		{64, 5, 4},
		{128, 7, 6},
		{512, 7, 6},
	} {
		var ends, middle, hugeKB int
		for try := 0; try < 2; try++ { // a huge page may be refused once while memory is compacted
			var ok bool
			if ends, middle, hugeKB, ok = prefaultCheck(c.mb << 20); !ok {
				t.Fatalf("%dM: cannot map or read residency", c.mb)
			}
			if !huge || hugeKB == c.hugeMB<<10 {
				break
			}
		}
		want, wantKB := c.ends, 0
		if huge {
			wantKB = c.hugeMB << 10
		}
		if ends != want<<20/os.Getpagesize() || middle != 0 || hugeKB != wantKB {
			t.Errorf("%dM: %d pages resident at the ends (want %d MiB of them), %d between them (want 0), %d kB in huge pages (want %d)",
				c.mb, ends, want, middle, hugeKB, wantKB)
		}
	}
}
