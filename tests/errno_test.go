//go:build lkl

package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// Errors Linux gives that kbox's own path handling must not change, found
// by LTP's tests (docs/conformance.md); each compared with the same
// commands run natively.

// rmdirScript removes ".", "..", "e/." and "e/.." from a directory d with
// a subdirectory e, printing each error's text.
const rmdirScript = `cd "$1" && mkdir -p d/e && cd d || exit 9
for p in . .. e/. e/..; do echo "$p: $(rmdir $p 2>&1 | sed 's/.*: //')"; done
`

var rmdirWant = []string{".: Invalid argument\n", "..: Directory not empty\n", "e/.: Invalid argument\n", "e/..: Directory not empty\n"}

// TestRmdirDots: rmdir of a path ending in "." is EINVAL, in ".."
// ENOTEMPTY, as on Linux (LTP rmdir02), also on a read-only image.
func TestRmdirDots(t *testing.T) {
	out, err := exec.Command("/bin/sh", "-c", rmdirScript, "sh", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("native: %v: %s", err, out)
	}
	for _, w := range rmdirWant {
		if !strings.Contains(string(out), w) {
			t.Fatalf("natively, output lacks %q: %s", w, out)
		}
	}
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"rmdir . and ..", []string{"--", "/bin/sh", "-c", rmdirScript, "sh", "/tmp"}, 0, rmdirWant, nil},
	})
}

// TestOPathFds: readlinkat(fd, "") of an O_PATH|O_NOFOLLOW fd of a symlink
// reads it; ioctl and the xattr calls on an O_PATH fd are EBADF (LTP
// readlinkat01, open13); an O_NOATIME open by another user is EPERM, also
// while a shadow of the file is cached (open02); the same as natively.
func TestOPathFds(t *testing.T) {
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/fdpath")
	cmd := exec.Command(prog)
	cmd.Dir = t.TempDir()
	native, err := cmd.Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, native)
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", "mkdir -p /tmp/fp && cd /tmp/fp && /opt/tests/fdpath")
	if st != 0 || out != string(native) {
		t.Errorf("status %d; under kbox:\n%s\nnatively:\n%s\n%s", st, out, native, stderr)
	}
}

// cwdScript changes directory through symlinks (relative, absolute, to a
// link) in directory $1 and prints what getcwd says, less $1.
const cwdScript = `cd "$1" && mkdir -p d/e && ln -s d l && ln -s "$1/d/e" l2 && ln -s l ll || exit 9
b=$(cd "$1" && /bin/pwd)
for p in l l2 ll ll/e; do (cd "$1/$p" && echo "$p -> $(/bin/pwd | sed "s|^$b||")"); done
`

var cwdWant = []string{"l -> /d\n", "l2 -> /d/e\n", "ll -> /d\n", "ll/e -> /d/e\n"}

// TestChdirThroughSymlink: after chdir through a symlink, getcwd gives
// the directory's own path, not the link's (LTP getcwd03), as natively.
func TestChdirThroughSymlink(t *testing.T) {
	out, err := exec.Command("/bin/sh", "-c", cwdScript, "sh", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("native: %v: %s", err, out)
	}
	for _, w := range cwdWant {
		if !strings.Contains(string(out), w) {
			t.Fatalf("natively, output lacks %q: %s", w, out)
		}
	}
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"getcwd after chdir through links", []string{"--", "/bin/sh", "-c", "mkdir -p /tmp/c && " + cwdScript, "sh", "/tmp/c"}, 0, cwdWant, nil},
	})
}

// TestCwdFollowsRename: a process's working directory moves with its
// directory when another process renames the directory (or one above
// it): relative paths, getcwd and cd .. follow it, as natively (LTP
// inotify02 renames its cwd, then unlinks a name in it).
func TestCwdFollowsRename(t *testing.T) {
	const script = `B=$(cd "$1" && /bin/pwd); cd "$1" && mkdir -p a/b && cd a/b && mv "$B/a" "$B/z" && touch f &&
echo "pwd $(/bin/pwd | sed "s|^$B||")" && ls "$B/z/b" && cd -P .. && echo "up $(/bin/pwd | sed "s|^$B||")"`
	want := []string{"pwd /z/b\n", "f\n", "up /z\n"}
	out, err := exec.Command("/bin/sh", "-c", script, "sh", t.TempDir()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), strings.Join(want, "")) {
		t.Fatalf("native: %v: %s", err, out)
	}
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"cwd renamed by another process", []string{"--", "/bin/sh", "-c", "mkdir -p /tmp/c && " + script, "sh", "/tmp/c"}, 0, want, nil},
	})
}

// TestLinkAcrossRoutes: link(2) from /proc into the image is EXDEV, as
// between any two filesystems on Linux (LTP linkat01), not EACCES.
func TestLinkAcrossRoutes(t *testing.T) {
	script := `cd "$1" && echo "link: $(ln /proc/cpuinfo y 2>&1 | sed 's/.*: //')"`
	want := []string{"link: Invalid cross-device link\n"}
	out, err := exec.Command("/bin/sh", "-c", script, "sh", t.TempDir()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), want[0]) {
		t.Fatalf("native: %v: %s", err, out)
	}
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"link from /proc", []string{"--", "/bin/sh", "-c", script, "sh", "/tmp"}, 0, want, nil},
	})
}
