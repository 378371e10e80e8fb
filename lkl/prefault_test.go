//go:build lkl

package lkl

import (
	"os"
	"testing"
)

// TestPrefault: the ends of the kernel's memory that boot writes first
// (glue.c's prefault: 3 MB at the bottom, 2 MB at the top, 4 MB from
// 128M on) are resident before the kernel runs, each end made in one
// call instead of a fault a page, and nothing between them is. Where the
// host gives transparent huge pages to those who ask and compacts memory
// for them (THP "always" or "madvise", defrag not "never" or "defer"),
// the ends' whole 2 MB pages are huge pages: the bottom's first 2 MB and
// the top; the bottom's third MB stays small pages.
func TestPrefault(t *testing.T) {
	huge, how := HostHugePages()
	if !huge {
		t.Logf("%s: small pages expected", how)
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

// TestHugeRest: once boot and the mounts are done, the kernel's memory
// from 4 MB above the highest page written, up to the top end, asks for
// huge pages (glue.c's huge_rest): a page written within those 4 MB (a
// guest's start) stays a small page, one written beyond is a huge page
// where the host gives them; with nothing left above, nothing is asked.
func TestHugeRest(t *testing.T) {
	huge, _ := HostHugePages()
	const mb = 1 << 20
	for _, c := range []struct {
		name         string
		size         int
		wrote, touch []uint64
		from         int64 // huge_rest's answer
		hugeMB       int   // the mapping's MiB in huge pages where the host gives them
	}{
		{"boot's pages to 4.3 MB", 128 * mb, []uint64{4*mb + 300<<10}, []uint64{8 * mb, 9 * mb, 10 * mb, 100 * mb}, 10 * mb, 6 + 4},
		{"the prefaulted ends alone", 128 * mb, nil, []uint64{7 * mb, 8 * mb}, 8 * mb, 6 + 2},
		{"a page 6 MB below the top's end", 128 * mb, []uint64{118 * mb}, []uint64{122 * mb}, -1, 6},
		{"the last page of a 16 MB read", 128 * mb, []uint64{108*mb - 4096}, []uint64{110 * mb, 112 * mb}, 112 * mb, 6 + 2},
		{"32M", 32 * mb, []uint64{4 * mb}, []uint64{5 * mb, 10 * mb, 28 * mb}, 10 * mb, 4 + 4},
		{"8M, no prefault", 8 * mb, nil, []uint64{4 * mb}, 4 * mb, 2},
	} {
		var from int64
		var hugeKB int
		for try := 0; try < 2; try++ { // a huge page may be refused once while memory is compacted
			var ok bool
			if from, hugeKB, ok = hugeRestCheck(c.size, c.wrote, c.touch); !ok {
				t.Fatalf("%s: cannot map", c.name)
			}
			if !huge || hugeKB == c.hugeMB<<10 {
				break
			}
		}
		wantKB := 0
		if huge {
			wantKB = c.hugeMB << 10
		}
		if from != c.from || hugeKB != wantKB {
			t.Errorf("%s: huge pages from %d (want %d), %d kB in huge pages (want %d)", c.name, from, c.from, hugeKB, wantKB)
		}
	}
}
