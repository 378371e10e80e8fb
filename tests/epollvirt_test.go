//go:build lkl

package tests

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestEpollVirtualFds: epoll_ctl, epoll_wait, splice and tee of fds kbox
// serves from LKL (a directory always; a file above KBOX_SHADOW_MAX)
// answer as Linux (tests/guest/epollvirt.c): a directory or file cannot
// be polled (EPERM, not the host's EBADF for a number it never saw), a
// bad event pointer is EFAULT first, an fd that is no epoll instance
// EINVAL, and splice and tee check the length, flags and access modes
// before the kinds of file. Every line must be what the program prints
// natively, in each tier, with shadows and with virtual files.
func TestEpollVirtualFds(t *testing.T) {
	img := copyImage(t, imagePath(t))
	prog := dumpFromImage(t, img, "/opt/tests/epollvirt")
	dir := filepath.Join(t.TempDir(), "e")
	b, err := exec.Command(prog, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, b)
	}
	native := string(b)
	// Written by a process that has exited, /tmp/e/f is a virtual fd
	// under the cap in the runs below.
	if _, stderr, st := runKbox(t, "image", "-S", img, "--", "/opt/tests/epollvirt", "/e", "make"); st != 0 {
		t.Fatalf("make: status %d\n%s", st, stderr)
	}
	for _, vars := range [][]string{nil, {"KBOX_SHADOW_MAX=4096"}} {
		for _, m := range tiers {
			args := []string{"image", "-S", img, "--ephemeral", "--syscall-mode=" + m}
			if m != "seccomp" {
				args = append(args, "--trusted")
			}
			out, stderr, st := runKboxEnv(t, kboxEnv{vars: vars}, append(args, "--", "/opt/tests/epollvirt", "/e")...)
			if st != 0 {
				t.Errorf("%s %v: status %d\n%s", m, vars, st, stderr)
			}
			if out != native {
				t.Errorf("%s %v:\n%s\nnatively:\n%s", m, vars, out, native)
			}
		}
	}
}
