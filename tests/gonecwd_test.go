//go:build lkl

package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemovedCwd: a working directory removed while a process is in it
// (rmdir, a rename over it) is gone as on Linux: getcwd is ENOENT,
// /proc/self/cwd reads "PATH (deleted)", no name is found there (a
// create is ENOENT), not even in a new directory made at its path, ".."
// leads to the parent, and a child forked there is there too: the lines
// of tests/guest/gonecwd.c natively and under kbox, in every tier (the
// child in the seccomp tier), and in a bind. kbox kept the path: getcwd
// answered it, and relative names were found in the new directory.
func TestRemovedCwd(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/gonecwd")
	native := map[bool]string{}
	for _, fork := range []bool{false, true} {
		args := []string{filepath.Join(t.TempDir(), "g")}
		if fork {
			args = append(args, "fork")
		}
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("native gonecwd: %v\n%s", err, out)
		}
		native[fork] = string(out)
	}
	if !strings.Contains(native[true], "a removed: getcwd ENOENT\n") || !strings.Contains(native[true], "child: f ENOENT\n") {
		t.Fatalf("natively:\n%s", native[true])
	}
	forEachTier(t, func(t *testing.T, m string) {
		args := []string{"image", "-S", copyImage(t, img), "--syscall-mode=" + m, "--trusted", "--", "/opt/tests/gonecwd", "/tmp/g"}
		fork := m == "seccomp"
		if fork {
			args = append(args, "fork")
		}
		out, stderr, st := runKbox(t, args...)
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "gonecwd", native[fork], out)
	})
	// In a bind (-b) the directories are the host's: the same. kbox kept
	// a cwd's path across a rename there too (where it followed renames
	// in the image).
	t.Run("bind", func(t *testing.T) {
		host := t.TempDir()
		out, stderr, st := runKbox(t, "image", "-S", copyImage(t, img), "-b", host+":/mnt/h", "--", "/opt/tests/gonecwd", "/mnt/h/g", "fork")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "gonecwd in a bind", native[true], out)
		out, stderr, st = runKbox(t, "image", "-S", copyImage(t, img), "-b", host+":/mnt/h", "--", "/bin/sh", "-c",
			"mkdir /mnt/h/d && echo hi > /mnt/h/d/f && cd /mnt/h/d && mv /mnt/h/d /mnt/h/e && /bin/pwd && cat f")
		if st != 0 || out != "/mnt/h/e\nhi\n" {
			t.Errorf("a cwd renamed in a bind: status %d\n%s\n%s", st, out, stderr)
		}
	})
}
