//go:build lkl

package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPtyPeer: a pty's slave taken from its master with TIOCGPTPEER (as
// glibc's openpty does) is the guest's lowest free fd in every tier (the
// in-process tiers gave kbox's number, 1034, which the guest could not
// use), the fd links of a pty name /dev/pts/N (they read "/0", the
// host's name in kbox's devpts instance, so ttyname failed), and a
// guest's fd numbers are the lowest free ones with the mode given as two
// words ("--syscall-mode rewrite" let Go's netpoll take 4 and 5 first):
// tests/guest/ptypeer.c natively and under kbox.
func TestPtyPeer(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/ptypeer")
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("native ptypeer: %v\n%s", err, out)
	}
	native := string(out)
	if !strings.Contains(native, "master 3 slave 4\n") || !strings.Contains(native, "opens: 5 6 7 8 9 10\n") {
		t.Fatalf("natively:\n%s", native)
	}
	forEachTier(t, func(t *testing.T, m string) {
		// The mode as two words and without --trusted: the in-process
		// tiers' fds must be reserved whichever way it is spelled.
		out, stderr, st := runKbox(t, "image", "-S", copyImage(t, img), "--syscall-mode", m, "--", "/opt/tests/ptypeer")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "ptypeer", native, out)
	})
}
