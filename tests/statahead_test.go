//go:build lkl

package tests

import (
	"strings"
	"testing"
)

// TestStatAhead: a walk that lstats, stats and statxes what it lists,
// depth first as busybox find does, gets the same answers in every
// tier, as root and as uid 1000, on a read-only image: files of several
// sizes, modes and link counts, symlinks (to files, to a directory,
// dangling), a FIFO, a long name, directories only root may search or
// nobody may, nested directories with files after them, and paths past
// 511 bytes. Then the prepared answers meet bad, read-only and half-
// writable buffers, paths that fault, a reused path buffer, other
// spellings, stats that follow, flags, relative paths, the old stat
// calls, statx of other flags and masks, and other threads
// (tests/guest/statahead.c). The rewrite tier answers such calls from
// what each listing prepared (dispatch/hint_stat.go, trap/hint_stat.c).
func TestStatAhead(t *testing.T) {
	img := copyImage(t, imagePath(t))
	out, stderr, st := runKbox(t, "image", "-S", img, "--", "/opt/tests/statahead", "/sa", "make")
	if st != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("make: status %d\n%s\nstderr: %s", st, out, lastLines(stderr, 5))
	}
	walks := map[string]string{}
	forEachTier(t, func(t *testing.T, tier string) {
		for _, who := range []struct {
			name string
			args []string
		}{
			{"", []string{"-S"}},
			{" as uid 1000", []string{"-R", "--change-id", "1000:1000"}},
		} {
			args := append([]string{"image", who.args[0], img, "--read-only", "--syscall-mode=" + tier}, who.args[1:]...)
			walk, stderr, st := runKbox(t, append(args, "--", "/opt/tests/statahead", "/sa", "walk")...)
			if st != 0 || strings.Count(walk, "\n") < 1000 {
				t.Fatalf("walk%s: status %d\n%s\nstderr: %s", who.name, st, lastLines(walk, 5), lastLines(stderr, 5))
			}
			walks[tier+who.name] = walk
			cases, stderr, st := runKbox(t, append(args, "--", "/opt/tests/statahead", "/sa", "cases")...)
			if st != 0 || strings.Contains(cases, "FAIL") || strings.Count(cases, ": ok\n") != 6 {
				t.Errorf("cases%s: status %d\n%s\nstderr: %s", who.name, st, cases, lastLines(stderr, 5))
			}
		}
	})
	for _, want := range []string{
		"l /sa/flat/l001 dev=",        // a symlink's own answer
		"s /sa/flat/dangle ENOENT",    // a dangling one followed
		"s /sa/flat/fifo dev=",        // a FIFO
		"l /sa/flat/nosearch/g1 dev=", // root searches any directory
		"x /sa/flat/l001 ",            // a statx answer
	} {
		if !strings.Contains(walks["seccomp"], want) {
			t.Errorf("the walk has no %q", want)
		}
	}
	for _, want := range []string{
		"opendir /sa/flat/locked EACCES", // not uid 1000's
		"l /sa/flat/nosearch/g1 EACCES",  // listed, not searchable
	} {
		if !strings.Contains(walks["seccomp as uid 1000"], want) {
			t.Errorf("the walk as uid 1000 has no %q", want)
		}
	}
	for run, walk := range walks {
		base := "seccomp"
		if strings.HasSuffix(run, " as uid 1000") {
			base += " as uid 1000"
		}
		if walk != walks[base] {
			d := lineDiff(walk, walks[base])
			t.Errorf("%s walks otherwise than %s (%s | %s):\n%s", run, base, run, base, d[:min(len(d), 2000)])
		}
	}
	assertCleanImage(t, img)
}
