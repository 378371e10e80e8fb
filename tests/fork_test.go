//go:build lkl

package tests

import (
	"os/exec"
	"testing"
)

// TestForkNeverEINTR: fork, vfork and thread creation never fail with
// EINTR on Linux, even while a handler without SA_RESTART runs thousands
// of times a second (a shell's SIGCHLD handler). In the seccomp tier a
// notified call can fail so when the signal comes before kbox received
// it, so fork, vfork and clone are not notified (dispatch/sys_proc_sched.go); and
// clone3 is answered in the filter (ENOSYS), never notified. The same
// binary natively gives the same line.
func TestForkNeverEINTR(t *testing.T) {
	img := imagePath(t)
	const want = "forkintr 300 0 0 0 other=0 clone3=ok alarms=yes\n"
	native, err := exec.Command(dumpFromImage(t, img, "/opt/tests/forkintr"), "300").Output()
	if err != nil || string(native) != want {
		t.Fatalf("natively: %q, %v", native, err)
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=seccomp", "--", "/opt/tests/forkintr", "300")
	if st != 0 || out != want {
		t.Errorf("status %d, got %q, want %q\n%s", st, out, want, stderr)
	}
}
