//go:build lkl

package tests

import (
	"os/exec"
	"strconv"
	"strings"
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

// TestHeredocNoEINTR: busybox sh writes a here-document of more than a
// pipe's atomic size from a child it forks, then dup2s the pipe's read end
// onto fd 0 as the child exits: its SIGCHLD handler has no SA_RESTART.
// dup2 of host fds never fails with EINTR on Linux; notified, it did when
// the signal came before kbox received the call (4 in 10 rounds here, the
// command then missing its input: autoconf's test programs came out empty).
// The filter now runs dup2 and dup3 of host fds natively. 100 rounds, each
// of 14 KB through cat, must all arrive whole, and a pump's output must be
// in the image when the next command reads it (`>>` to a virtual fd).
func TestHeredocNoEINTR(t *testing.T) {
	img := imagePath(t)
	body := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstu\n", 200)
	// As configure writes its test programs: cat confdefs.h - <<_ACEOF >conftest.c
	script := "cd /tmp && echo confdefs > confdefs.h && bad=0 && for i in $(seq 100); do cat confdefs.h - <<EOF >out\n" + body + "EOF\n" +
		"[ \"$(wc -c < out)\" = " + strconv.Itoa(len(body)+len("confdefs\n")) + " ] || bad=$((bad+1)); done; echo bad=$bad; " +
		"mkdir -p d && for i in $(seq 20); do echo line$i >> d/big; done; wc -l < d/big"
	for _, env := range [][]string{nil, {"KBOX_SHADOW_MAX=1"}} {
		out, stderr, st := runKboxEnv(t, kboxEnv{vars: env}, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c", script)
		if st != 0 || out != "bad=0\n20\n" {
			t.Errorf("%v: status %d, stdout %q\nstderr: %s", env, st, out, lastLines(stderr, 10))
		}
	}
}
