//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Mounts a guest makes for itself: once the guest closed its files there,
// kbox's own (shadow nodes, their filesystem's statfs fd) must not keep
// the filesystem busy, as LTP's tests that mount a tmpfs need (umount
// then EBUSY), and files a guest still holds must, as on Linux.

const mountScript = `mkdir -p /tmp/m && mount -t tmpfs none /tmp/m || exit 9
echo hi > /tmp/m/f && cat /tmp/m/f
mount -o remount,ro /tmp/m && echo remounted-ro
mount -o remount,rw /tmp/m && echo remounted-rw
exec 3</tmp/m/f
umount /tmp/m 2>/dev/null || echo held-busy
exec 3<&-
umount /tmp/m && echo unmounted
mount -t tmpfs none /tmp/m && echo again > /tmp/m/g && cat /tmp/m/g && umount /tmp/m && echo unmounted-again
`

var mountWant = []string{"hi\n", "remounted-ro\n", "remounted-rw\n", "held-busy\n", "unmounted\n", "again\n", "unmounted-again\n"}

// TestGuestMountUnmount: a guest mounts a tmpfs, writes and reads a file
// there, remounts it read-only and unmounts it; an open file keeps it busy.
func TestGuestMountUnmount(t *testing.T) {
	if os.Geteuid() == 0 {
		// The same script natively, in a mount namespace of its own.
		dir := t.TempDir()
		script := "mount -t tmpfs none " + dir + " && cd / && mkdir -p /tmp && " +
			"mount --bind " + dir + " /tmp && " + mountScript
		out, err := exec.Command("unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Logf("native run failed (%v): %s", err, out)
		} else {
			rest := string(out)
			for _, w := range mountWant {
				if !strings.Contains(rest, w) {
					t.Fatalf("natively, output lacks %q: %s", w, out)
				}
			}
		}
	}
	img := copyImage(t, imagePath(t))
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"mount, remount, umount", []string{"-c", mountScript}, 0, mountWant, []string{"device or resource busy"}},
	})
	assertCleanImage(t, img)
}
