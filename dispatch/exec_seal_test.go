package dispatch

import (
	"bytes"
	"testing"

	"github.com/kbox-project/kbox/elfload"
	"golang.org/x/sys/unix"
)

// TestExecMemfdSealed: the memfd a program or loader is executed from
// (image.seal) refuses every change, also where it is the file's own
// memfd, which readMemfd has mapped to inspect its bytes: a shared
// mapping of a writable memfd makes F_SEAL_WRITE fail (EBUSY).
func TestExecMemfdSealed(t *testing.T) {
	data := bytes.Repeat([]byte("kbox"), 3000)
	for _, patch := range []string{"", "/proc/self/fd/1001"} {
		c, en := readMemfd("kbox-exec:/t", len(data), func(int) bool { return false }, func(b []byte, off int) (int, unix.Errno) {
			return copy(b, data[off:]), 0
		})
		if en != 0 {
			t.Fatalf("readMemfd: %v", en)
		}
		// A key whose change time is to come: nothing is cached.
		k := execKey{host: true, dev: 1, ino: 2, size: int64(len(data)), ctime: 1 << 40}
		im := &image{path: "/t", c: c, key: k, info: &elfload.Info{Kind: elfload.Static}}
		fd, en := im.seal(patch)
		if en != 0 {
			t.Fatalf("seal(%q): %v", patch, en)
		}
		seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if err != nil {
			t.Fatal(err)
		}
		const want = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
		if seals&want != want {
			t.Errorf("seal(%q): seals %#x, want %#x", patch, seals, want)
		}
		if _, err := unix.Pwrite(fd, []byte("evil"), 0); err == nil {
			t.Errorf("seal(%q): the memfd took a write", patch)
		}
		got := make([]byte, len(data))
		if n, _ := unix.Pread(fd, got, 0); n != len(data) || !bytes.Equal(got, data) {
			t.Errorf("seal(%q): the memfd holds other bytes", patch)
		}
		unix.Close(fd)
		im.c.release()
	}
}
