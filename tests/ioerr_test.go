//go:build lkl

package tests

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fileSectors returns the KBOX_TEST_DISK_EIO ranges (512-byte sectors)
// of a file's data blocks in an ext4 image, learnt with debugfs, each
// range with prefix ("", "r:" or "w:"); adjacent blocks are merged.
func fileSectors(t *testing.T, img, path, prefix string) string {
	t.Helper()
	out, err := exec.Command("dumpe2fs", "-h", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dumpe2fs: %v\n%s", err, out)
	}
	bs := 0
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Block size:"); ok {
			bs, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	out, err = exec.Command("debugfs", "-R", "blocks "+path, img).Output()
	if err != nil || bs == 0 {
		t.Fatalf("debugfs blocks %s: %v (block size %d)\n%s", path, err, bs, out)
	}
	var ext [][2]uint64 // first, last block
	for _, f := range strings.Fields(string(out)) {
		b, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("debugfs blocks %s: %q", path, out)
		}
		if n := len(ext); n > 0 && ext[n-1][1]+1 == b {
			ext[n-1][1] = b
		} else {
			ext = append(ext, [2]uint64{b, b})
		}
	}
	if len(ext) == 0 {
		t.Fatalf("debugfs: %s has no blocks", path)
	}
	per := uint64(bs / 512)
	var ranges []string
	for _, e := range ext {
		ranges = append(ranges, fmt.Sprintf("%s%d-%d", prefix, e[0]*per, (e[1]+1)*per-1))
	}
	return strings.Join(ranges, ",")
}

// imageFile reads a file of an image on the host with debugfs.
func imageFile(t *testing.T, img, path string) []byte {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "cat "+path, img).Output()
	if err != nil {
		t.Fatalf("debugfs cat %s: %v", path, err)
	}
	return out
}

// TestDiskIOErrors: the image's disk fails the requests touching one
// file's data blocks (KBOX_TEST_DISK_EIO, a disk backend of kbox's own,
// lkl/faultdisk.c). The guest gets EIO reading the file, and EIO from
// fsync after overwriting it; everything else keeps working, kbox exits
// with the guest's status in time, without a panic, and the image is
// clean and unchanged outside the failing blocks.
func TestDiskIOErrors(t *testing.T) {
	img := copyImage(t, imagePath(t))
	if _, _, st := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c",
		"head -c 65536 /dev/urandom > /victim && echo intact > /bystander && sync"); st != 0 {
		t.Fatalf("writing /victim: status %d", st)
	}
	before := imageFile(t, img, "/victim")
	if len(before) != 65536 {
		t.Fatalf("/victim has %d bytes on the image, want 65536", len(before))
	}

	run := func(eio, script string) (string, string, int) {
		t.Helper()
		t.Setenv("KBOX_TEST_DISK_EIO", eio)
		out, errOut, st, _ := runKboxWithin(t, 60*time.Second, "image", "-S", img, "--", "/bin/sh", "-c", script)
		for _, bad := range []string{"panic:", "goroutine ", "SIGSEGV", "fatal error"} {
			if strings.Contains(errOut, bad) {
				t.Errorf("kbox stderr has %q:\n%s", bad, errOut)
			}
		}
		if !strings.Contains(errOut, "disk requests failed with injected I/O errors") {
			t.Errorf("kbox did not report injected I/O errors (no fault injection?)\nstdout: %s\nstderr: %s", out, errOut)
		}
		return out, errOut, st
	}

	t.Run("read", func(t *testing.T) {
		out, errOut, st := run(fileSectors(t, img, "/victim", ""),
			"/opt/tests/ioerr read /victim; echo status=$?; cat /victim >/dev/null; echo cat=$?; cat /bystander; exit 3")
		// As on Linux: the open succeeds, the read gets EIO (the file
		// could not become a shadow, and is served through LKL).
		for _, want := range []string{"open ok ", "read errno EIO\n", "status=1\n", "cat=1\n", "intact\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q\nstdout: %s\nstderr: %s", want, out, errOut)
			}
		}
		if !strings.Contains(errOut, "Input/output error") {
			t.Errorf("cat's stderr lacks Input/output error:\n%s", errOut)
		}
		if st != 3 {
			t.Errorf("kbox status %d, want the guest's 3\nstderr: %s", st, errOut)
		}
		assertCleanImage(t, img)
		if !bytes.Equal(imageFile(t, img, "/victim"), before) {
			t.Errorf("/victim changed on the image")
		}
	})

	t.Run("fsync", func(t *testing.T) {
		out, errOut, st := run(fileSectors(t, img, "/victim", "w:"), "/opt/tests/ioerr fsync /victim; echo status=$?; echo still > /bystander; cat /bystander")
		// As on Linux: the write lands in the page cache, fsync reports
		// the failed write-back once.
		want := "open ok 3\npwrite ok 4096\nfsync errno EIO\nfsync-again ok 0\nclose ok 0\nstatus=1\nstill\n"
		if out != want {
			t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %s", out, want, errOut)
		}
		if st != 0 {
			t.Errorf("kbox status %d, want 0\nstderr: %s", st, errOut)
		}
		assertCleanImage(t, img)
		// The failing blocks were never written: the old content.
		if !bytes.Equal(imageFile(t, img, "/victim"), before) {
			t.Errorf("/victim's blocks changed on the image although every write to them failed")
		}
		if got := string(imageFile(t, img, "/bystander")); got != "still\n" {
			t.Errorf("/bystander on the image: %q, want \"still\\n\"", got)
		}
	})

	t.Run("bad-value", func(t *testing.T) {
		t.Setenv("KBOX_TEST_DISK_EIO", "9-1")
		_, errOut, st := runKbox(t, "image", "-S", img, "--", "/bin/true")
		if st != 125 || !strings.Contains(errOut, "KBOX_TEST_DISK_EIO") || !strings.Contains(errOut, "bad sector range") {
			t.Errorf("status %d, want 125 and a message naming KBOX_TEST_DISK_EIO\nstderr: %s", st, errOut)
		}
	})
}
