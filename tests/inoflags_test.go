//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// inoflagsWant is what tests/guest/inoflags prints on Linux (ext4, as
// root): the append-only and immutable attributes refuse what they refuse,
// an append-only file opens for appending, and only the owner (or
// CAP_FOWNER) changes them.
const inoflagsWant = "getflags ok\n" +
	"getflags bad pointer EFAULT\n" +
	"setflags bad pointer EFAULT\n" +
	"append set ok\n" +
	"append read back through another fd set\n" +
	"append open O_WRONLY EPERM\n" +
	"append open O_WRONLY|O_APPEND ok\n" +
	"append setxattr EPERM\n" +
	"append chmod EPERM\n" +
	"append rename EPERM\n" +
	"append unlink EPERM\n" +
	"append clear ok\n" +
	"append cleared yes\n" +
	"append setxattr after ok\n" +
	"immutable set ok\n" +
	"immutable read back through another fd set\n" +
	"immutable open O_WRONLY EPERM\n" +
	"immutable open O_WRONLY|O_APPEND EPERM\n" +
	"immutable setxattr EPERM\n" +
	"immutable chmod EPERM\n" +
	"immutable rename EPERM\n" +
	"immutable unlink EPERM\n" +
	"immutable clear ok\n" +
	"immutable cleared yes\n" +
	"immutable setxattr after ok\n" +
	"getflags O_PATH EBADF\n" +
	"getflags directory ok\n" +
	"getflags pipe ENOTTY\n" +
	"nobody set append EPERM\n" +
	"nobody getflags ok\n"

// TestInodeFlags: chattr's and lsattr's ioctls (FS_IOC_SETFLAGS,
// FS_IOC_GETFLAGS) on a file of the image act on its inode in LKL, in
// every tier, as on Linux (LTP setxattr03): they ran natively on the
// shadow's memfd, so the attribute stopped nothing done by path (setxattr,
// unlink, rename, chmod) and was lost with the memfd. An append-only file
// then opens for writing with O_APPEND, and its appends land after what
// the file holds. Natively (as root, on a filesystem with the attributes)
// the program prints the same.
func TestInodeFlags(t *testing.T) {
	img := imagePath(t)
	if os.Geteuid() == 0 {
		out, err := exec.Command(dumpFromImage(t, img, "/opt/tests/inoflags"), t.TempDir()).Output()
		switch {
		case err != nil || !strings.Contains(string(out), "append set ok\n"):
			t.Logf("native run not compared (no inode attributes here): %v\n%s", err, out)
		case string(out) != inoflagsWant:
			t.Errorf("natively:\n%s\nwant:\n%s", out, inoflagsWant)
		}
	}
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/opt/tests/inoflags", "/tmp")
		if st != 0 || out != inoflagsWant {
			t.Errorf("status %d:\n%s\nwant:\n%s\n%s", st, out, inoflagsWant, lastLines(stderr, 5))
		}
	})
	// Appends through a new O_APPEND open and a write at an offset through
	// an fd opened before the attribute was set both reach the image, with
	// a writer's shadow open (append) and without (append-ro: a virtual
	// fd appends in LKL).
	t.Run("appends reach the image", func(t *testing.T) {
		script := "cd /tmp && echo one > log && /opt/tests/inoflags append log && /opt/tests/inoflags append-ro log && cat log"
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", script)
		if want := "Xne\ntwo\ntwo\n"; st != 0 || out != want {
			t.Errorf("status %d: %q, want %q\n%s", st, out, want, lastLines(stderr, 5))
		}
	})
}
