//go:build lkl

package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreHelperNonRoot: a kbox run by an unprivileged user on a
// writable image gets its content store from the helper process, started
// beside the boot (shadowfd.Prestart). Writes made after the run settled
// (a second in, when kbox ends its idle threads: the helper must not die
// with the thread that started it) grow the store; they reach the image,
// and no helper outlives kbox.
func TestStoreHelperNonRoot(t *testing.T) {
	setpriv, dir, img, bin := asNobody(t)
	ctx, cancel := context.WithTimeout(context.Background(), kboxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		bin, "image", "-S", img, "--", "/bin/sh", "-c",
		"sleep 1.5; for i in 1 2 3 4 5 6; do head -c 3000000 /dev/urandom > /root/f$i || echo FAIL; done; "+
			"cat /root/f* | md5sum > /root/sum; cat /root/sum")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "FAIL") || len(strings.Fields(string(out))) != 2 {
		t.Fatalf("kbox as nobody: %v\n%s", err, out)
	}
	// No helper left: it is the copied binary, named by its exe link.
	deadline := time.Now().Add(2 * time.Second)
	for left := helpersOf(bin); len(left) > 0; left = helpersOf(bin) {
		if time.Now().After(deadline) {
			t.Errorf("processes of %s left after kbox exited: %v", bin, left)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The image has what was written.
	got, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", "cat /root/f* | md5sum; cat /root/sum")
	if f := strings.Fields(got); st != 0 || len(f) != 4 || f[0] != f[2] || f[0] != strings.Fields(string(out))[0] {
		t.Errorf("next run: status %d, sums %q, want twice %q\n%s", st, got, out, stderr)
	}
}

// helpersOf lists the pids whose executable is bin.
func helpersOf(bin string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && exe == bin {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// asNobody prepares a run of kbox by an unprivileged user (uid 65534,
// through setpriv): a directory of its own with a copy of the test image
// and of kbox. It skips without root or setpriv.
func asNobody(t *testing.T) (setpriv, dir, img, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (needs root to run kbox as nobody)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("SKIP (needs setpriv)")
	}
	// Not t.TempDir: its parent is not searchable by others.
	dir, err = os.MkdirTemp("", "kbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	os.Chown(dir, 65534, 65534)
	img = filepath.Join(dir, "rootfs.ext4")
	if b, err := exec.Command("cp", "--sparse=always", imagePath(t), img).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	os.Chown(img, 65534, 65534)
	bin = filepath.Join(dir, "kbox")
	if b, err := exec.Command("cp", kboxBin(t), bin).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return setpriv, dir, img, bin
}
