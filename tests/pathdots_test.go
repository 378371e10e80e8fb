//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"testing"
)

// TestPathDots: calls on paths whose last component is "." or ".." or
// that end in slashes give Linux's results, in the image and in a bind,
// in each tier (tests/guest/pathdots.c against a native run). Before,
// mkdir("nx/./") made nx where Linux says ENOENT, and a rename to, or an
// rmdir of, "nz/." was EBUSY or EINVAL without looking for nz (ENOENT):
// autoconf's "mkdir handles trailing dot" said no, and gnulib's rename
// test failed.
func TestPathDots(t *testing.T) {
	img := imagePath(t)
	native := nativeGuest(t, "pathdots")
	if native == "" {
		t.Skip("SKIP (needs musl-gcc for the native run): apt-get install musl-tools")
	}
	dir := t.TempDir()
	want, err := exec.Command(native, dir, "native").CombinedOutput()
	if err != nil {
		t.Fatalf("natively: %v\n%s", err, want)
	}
	bind := t.TempDir()
	if err := os.Chmod(bind, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tier := range []string{"seccomp", "trap", "rewrite"} {
		for _, where := range []string{"/root", "/mnt"} {
			out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--syscall-mode="+tier, "--trusted",
				"-b", bind+":/mnt", "--", "/opt/tests/pathdots", where, tier)
			if st != 0 {
				t.Errorf("%s in %s: status %d\n%s", tier, where, st, stderr)
			}
			diffLines(t, tier+" in "+where, string(want), out)
		}
	}
}

// TestDupLimit: F_DUPFD and F_DUPFD_CLOEXEC of a host fd at or above
// RLIMIT_NOFILE are EINVAL, and dup2 and dup3 there EBADF, as on Linux
// (tests/guest/duplimit.c against a native run). Before, the F_DUPFD
// calls gave virtual fds at any number: autoconf's "fcntl handles F_DUPFD
// correctly" said no, and gnulib's fcntl test failed.
func TestDupLimit(t *testing.T) {
	img := imagePath(t)
	native := nativeGuest(t, "duplimit")
	if native == "" {
		t.Skip("SKIP (needs musl-gcc for the native run): apt-get install musl-tools")
	}
	want, err := exec.Command(native).CombinedOutput()
	if err != nil {
		t.Fatalf("natively: %v\n%s", err, want)
	}
	for _, tier := range []string{"seccomp", "trap", "rewrite"} {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--trusted", "--", "/opt/tests/duplimit")
		if st != 0 {
			t.Errorf("%s: status %d\n%s", tier, st, stderr)
		}
		diffLines(t, tier, string(want), out)
	}
}
