//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFcntl64: fcntl's record locks with 64-bit offsets and F_NOTIFY, as
// Linux has them, in every tier (tests/guest/fcntl64; the same binary
// natively gives the same table). The locks of a file of the image are
// the host kernel's on its content file, at every offset beyond 2^31 up to
// the largest, with Linux's EINVAL, EOVERFLOW and EBADF at the limits and
// the ranges F_GETLK and F_OFD_GETLK report. F_NOTIFY with no event to
// watch (DN_MULTISHOT alone: CPython's test_fcntl_64_bit) removes the
// fd's watches, none: 0 on a directory of the image, as on Linux (it was
// EINVAL). fcntl of an O_PATH fd of the image is EBADF, as Linux's, also
// for locks (it was ENOLCK). A watch (DN_CREATE) of a directory of the
// image is EINVAL: kbox's LKL has no dnotify (docs/tiers.md); Linux sets
// it.
func TestFcntl64(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/fcntl64")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, filepath.Join(dir, "f"), filepath.Join(dir, "d"), "watch").Output()
	if err != nil {
		t.Fatalf("natively: %v\n%s", err, out)
	}
	native := strings.Split(strings.TrimSpace(string(out)), "\n")
	differs := map[string]string{"notify-dir-create": "notify-dir-create EINVAL"}
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--",
			"/opt/tests/fcntl64", "/tmp/f", "/", "watch")
		got := strings.Split(strings.TrimSpace(out), "\n")
		if st != 0 || len(got) != len(native) {
			t.Fatalf("status %d, %d lines (natively %d)\n%s\nstderr: %s", st, len(got), len(native), out, lastLines(stderr, 5))
		}
		for i, want := range native {
			if w, ok := differs[strings.Fields(want)[0]]; ok {
				want = w
			}
			if got[i] != want {
				t.Errorf("%q, want %q", got[i], want)
			}
		}
	})
}
