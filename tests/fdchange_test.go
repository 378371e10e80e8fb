//go:build lkl

package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChangesThroughFds: chmod, chown and utimensat of /proc/self/fd/N
// reach the fd's file, and the AT_EMPTY_PATH forms the fd's own file
// (tests/guest/fdchange.c), for directories and files through O_PATH
// fds (virtual fds), a file open for reading (a shadow, or a virtual fd
// above KBOX_SHADOW_MAX), and as nobody. libc's fchmodat with
// AT_SYMLINK_NOFOLLOW chmods /proc/self/fd/N of an O_PATH fd: GNU tar
// sets its directories' modes so, and kbox refused it (EACCES). Every
// line must be what the program prints natively, in each tier.
func TestChangesThroughFds(t *testing.T) {
	img := copyImage(t, imagePath(t))
	prog := dumpFromImage(t, img, "/opt/tests/fdchange")
	dir := filepath.Join(t.TempDir(), "c")
	b, err := exec.Command(prog, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, b)
	}
	native := strings.ReplaceAll(string(b), dir, "/c")
	b, err = exec.Command(prog, dir, "one").CombinedOutput()
	if err != nil {
		t.Fatalf("native, one process: %v\n%s", err, b)
	}
	nativeOne := strings.ReplaceAll(string(b), dir, "/c")
	if _, stderr, st := runKbox(t, "image", "-S", img, "--", "/opt/tests/fdchange", "/c", "make"); st != 0 {
		t.Fatalf("make: status %d\n%s", st, stderr)
	}
	for _, vars := range [][]string{nil, {"KBOX_SHADOW_MAX=4096"}} {
		for _, m := range tiers {
			args := []string{"image", "-S", img, "--ephemeral", "--syscall-mode=" + m, "--", "/opt/tests/fdchange", "/c"}
			want := native
			if m != "seccomp" {
				// One process: no fork to run as nobody.
				args, want = append(append(args[:4:4], "--trusted"), append(args[4:], "one")...), nativeOne
			}
			out, stderr, st := runKboxEnv(t, kboxEnv{vars: vars}, args...)
			if st != 0 {
				t.Errorf("%s %v: status %d\n%s", m, vars, st, stderr)
			}
			if out != want {
				t.Errorf("%s %v:\n%s\nnatively:\n%s", m, vars, out, want)
			}
		}
	}
}

// tarScript makes a tree of directories with modes and times, then
// copies it with GNU tar and cp -a, and compares the copies' modes and
// times with the tree's.
const tarScript = `set -e; cd /tmp; mkdir -p src/a/b src/c; echo x > src/a/b/f
chmod 750 src/a; chmod 705 src/a/b; chmod 711 src/c; chmod 640 src/a/b/f
touch -d @1000000000 src/a/b/f src/a/b src/a src/c src
tar cf t.tar -C src .; mkdir dst; tar xf t.tar -C dst; cp -a src cpa
tar --version | head -1
for d in src dst cpa; do (cd $d && stat -c '%a %Y %n' . a a/b a/b/f c) > $d.lst; done
cat src.lst; cmp src.lst dst.lst; cmp src.lst cpa.lst; echo same`

// TestGNUTarModes: Debian's GNU tar sets an extracted directory's mode
// with fchmodat(AT_SYMLINK_NOFOLLOW), which glibc makes an O_PATH open
// and a chmod of /proc/self/fd/N; kbox refused that chmod (EACCES), so
// tar failed ("Cannot change mode") and left its directories 0700. The
// copies by tar and cp -a must have the tree's modes and times.
func TestGNUTarModes(t *testing.T) {
	img := packageImage(t, "tar")
	out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/bash", "-c", tarScript)
	if st != 0 || !strings.Contains(out, "(GNU tar)") || !strings.Contains(out, "750 1000000000 a\n") || !strings.HasSuffix(out, "same\n") {
		t.Errorf("status %d\n%s\n%s", st, out, stderr)
	}
}
