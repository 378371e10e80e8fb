//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccessModes: an fd reads and writes only as its open asked
// (tests/guest/accmode.c), whether the file is a shadow (each tier) or
// a virtual fd above KBOX_SHADOW_MAX, as root and as nobody: reads and
// sendfile of a write-only fd and writes of a read-only one are EBADF.
// LKL opens a write-only file read-write (a shadow's fill reads it), and
// a virtual fd of that LKL file used to read the file. Every line must
// be what the program prints natively.
func TestAccessModes(t *testing.T) {
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/accmode")
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody's way in
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := exec.Command(prog, filepath.Join(dir, "a")).CombinedOutput()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, b)
	}
	native := string(b)
	if os.Geteuid() != 0 {
		// The guest is root: only the owner's lines compare.
		t.Logf("not root: the nobody cases are not compared")
	}
	same := func(what, out string) {
		t.Helper()
		if os.Geteuid() != 0 {
			out = ownerLines(out)
		}
		if out != native {
			t.Errorf("%s:\n%s\nnatively:\n%s", what, out, native)
		}
	}
	for _, m := range tiers {
		args := []string{"image", "-S", img, "--ephemeral", "--syscall-mode=" + m}
		if m != "seccomp" {
			args = append(args, "--trusted")
		}
		out, stderr, st := runKbox(t, append(args, "--", "/opt/tests/accmode", "/tmp/a")...)
		if st != 0 {
			t.Errorf("%s: status %d\n%s", m, st, stderr)
		}
		same(m+", shadows", out)
	}
	// Written by a process that has exited, the files are virtual fds.
	out, stderr, st := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4096"}}, "image", "-S", img, "--ephemeral", "-c",
		"/opt/tests/accmode /tmp/a make && /opt/tests/accmode /tmp/a")
	if st != 0 {
		t.Errorf("virtual fds: status %d\n%s", st, stderr)
	}
	same("virtual fds", out)
}

// ownerLines keeps accmode's lines of the files' owner.
func ownerLines(out string) string {
	var keep []string
	for _, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, "owner ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}
