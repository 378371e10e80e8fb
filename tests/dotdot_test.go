//go:build lkl

package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDotDot: ".." goes up from the directory a path has reached, its
// links followed, as Linux's lookup does ("link/.." is the parent of the
// link's target; "file/.." is ENOTDIR, "missing/.." ENOENT; through a
// working directory or a directory fd entered by a link; through
// /proc/self, /proc/self/cwd, /proc/self/fd/N and /proc/self/root), a
// trailing slash follows /dev/fd's links (/dev/fd/ is /proc/self/fd,
// /dev/fd/0/ of a pipe ENOTDIR, of a missing fd ENOENT), /dev/fd/N names
// no fd /proc/self/fd does not list (kbox's own, in an in-process
// tier), /dev/stdin opens any number of times in one run, and a rename
// from or to a name "." or ".." is EBUSY (a rename of "link/.." moved
// a directory): the lines
// of tests/guest/dotdot.c natively and under kbox, in every tier.
func TestDotDot(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/dotdot")
	out, err := exec.Command(bin, t.TempDir()).Output()
	if err != nil {
		t.Fatalf("native dotdot: %v\n%s", err, out)
	}
	native := string(out)
	if !strings.Contains(native, "l/..: a/b\n") || !strings.Contains(native, "100 opens of /dev/stdin: 0 failed\n") {
		t.Fatalf("natively:\n%s", native)
	}
	forEachTier(t, func(t *testing.T, m string) {
		out, stderr, st := runKbox(t, "image", "-S", copyImage(t, img), "--syscall-mode="+m, "--trusted", "--", "/opt/tests/dotdot", "/tmp/dotdot")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "dotdot", native, out)
	})
}
