//go:build lkl

package tests

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestUnseenParent: a process whose parent kbox never saw (no notified
// call between the parent's fork and the child's first one: the subshell
// of `(cmd &)`) takes its cwd, credentials and virtual fds from that
// parent, as on Linux (tests/guest/unseenparent.c, against native). kbox
// gave it the first process's credentials and a cwd of / (so `(echo x >
// ff &)` in /tmp wrote a new /ff, and a reader of the FIFO /tmp/ff waited
// for ever), or killed it once any credentials had changed. Then a shell
// does that pattern 20 times.
func TestUnseenParent(t *testing.T) {
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/unseenparent")
	for _, args := range [][]string{{"/tmp"}, {"/tmp", "65534"}} {
		b, err := exec.Command(prog, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("native %v: %v\n%s", args, err, b)
		}
		out, stderr, st := runKbox(t, append([]string{"image", "-S", img, "--ephemeral", "--", "/opt/tests/unseenparent"}, args...)...)
		if st != 0 || out != string(b) {
			t.Errorf("%v: status %d\n%s\nnatively:\n%s\n%s", args, st, out, b, stderr)
		}
	}
	script := `cd /tmp; for i in $(seq 20); do rm -f ff; mkfifo ff; (echo "through $i" > ff &); cat ff; done; ls /ff 2>/dev/null`
	out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c", script)
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "through %d\n", i)
	}
	if out != want.String() {
		t.Errorf("(echo > fifo &) and cat, status %d:\n%s\n%s", st, out, stderr)
	}
}
