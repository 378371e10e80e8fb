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
		c := memfdOf(t, data)
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

// TestExecPatchInPlace: a dynamic program's PT_INTERP is rewritten in the
// memfd kbox read the file into, which is then sealed and run: no copy
// of the whole program (the same inode), the file's other bytes as they
// were, and the image holds no bytes after it. A memfd sealed before (the
// program run unpatched) is copied instead, and keeps its own bytes.
func TestExecPatchInPlace(t *testing.T) {
	const interp, patch = "/lib64/ld-linux-x86-64.so.2\x00", "/proc/self/fd/1001"
	const at = 4096
	data := bytes.Repeat([]byte("kbox"), 3000)
	copy(data[at:], interp)
	want := bytes.Clone(data)
	copy(want[at:at+len(interp)], make([]byte, len(interp)))
	copy(want[at:], patch)
	read := func() *image {
		c := memfdOf(t, data)
		// A change time to come: nothing is cached.
		k := execKey{host: true, dev: 1, ino: 2, size: int64(len(data)), ctime: 1 << 40}
		return &image{path: "/t", c: c, key: k, info: &elfload.Info{Kind: elfload.Dynamic, InterpOff: at, InterpLen: len(interp)}}
	}
	inode := func(fd int) uint64 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	holds := func(fd int, b []byte) bool {
		got := make([]byte, len(b)+1)
		n, _ := unix.Pread(fd, got, 0)
		return n == len(b) && bytes.Equal(got[:n], b)
	}

	im := read()
	own := inode(im.c.fd)
	fd, en := im.seal(patch)
	if en != 0 {
		t.Fatalf("seal: %v", en)
	}
	if got := inode(fd); got != own {
		t.Errorf("the patched program is a copy (inode %d), not the memfd read (%d)", got, own)
	}
	if !holds(fd, want) {
		t.Error("the patched memfd holds other bytes than the file with its PT_INTERP rewritten")
	}
	if _, err := unix.Pwrite(fd, []byte("evil"), 0); err == nil {
		t.Error("the patched memfd took a write")
	}
	if im.c.read() {
		t.Error("the image still holds the bytes it gave to the exec")
	}
	unix.Close(fd)

	im = read()
	plain, en := im.seal("")
	if en != 0 {
		t.Fatalf("seal(\"\"): %v", en)
	}
	fd, en = im.seal(patch)
	if en != 0 {
		t.Fatalf("seal after seal(\"\"): %v", en)
	}
	if inode(fd) == inode(plain) || !holds(fd, want) {
		t.Error("a program sealed unpatched before: its patched memfd is not a patched copy")
	}
	if !holds(plain, data) {
		t.Error("the unpatched memfd changed")
	}
	unix.Close(fd)
	unix.Close(plain)
	im.c.release()
}

// memfdOf is readMemfd's memfd of data.
func memfdOf(t *testing.T, data []byte) content {
	t.Helper()
	c, en := readMemfd("kbox-exec:/t", len(data), func(int) bool { return false }, func(b []byte, off int) (int, unix.Errno) {
		return copy(b, data[off:]), 0
	})
	if en != 0 {
		t.Fatalf("readMemfd: %v", en)
	}
	return c
}

// TestExecSealBusy: a memfd the kernel will not seal (EBUSY: here a
// shared writable mapping of it, which another holder of its pages would
// give too) is copied, and the copy sealed and run, with the same bytes;
// the mapping's later writes do not reach it.
func TestExecSealBusy(t *testing.T) {
	data := bytes.Repeat([]byte("kbox"), 3000)
	c := memfdOf(t, data)
	defer c.release()
	m, err := unix.Mmap(c.fd, 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	held, err := unix.Dup(c.fd)
	if err != nil {
		t.Fatal(err)
	}
	k := execKey{host: true, dev: 1, ino: 2, size: int64(len(data)), ctime: 1 << 40}
	fd, en := cacheSealed("/t", k, held)
	if en != 0 {
		t.Fatalf("cacheSealed with a writable mapping held: %v", en)
	}
	defer unix.Close(fd)
	copy(m, "evil")
	got := make([]byte, len(data)+1)
	if n, _ := unix.Pread(fd, got, 0); n != len(data) || !bytes.Equal(got[:n], data) {
		t.Error("the sealed copy does not hold the program's bytes, or took the mapping's write")
	}
	if _, err := unix.Pwrite(fd, []byte("evil"), 0); err == nil {
		t.Error("the sealed copy took a write")
	}
}

// TestExecFdsCloseOnExec: the memfds an exec hands on and the exec
// cache's copies are close-on-exec, so that no process kbox starts (a
// helper, a spawned guest) inherits one.
func TestExecFdsCloseOnExec(t *testing.T) {
	data := bytes.Repeat([]byte("kbox"), 3000)
	c := memfdOf(t, data)
	// A change time long past: the sealed memfd is cached.
	k := execKey{host: true, dev: 1, ino: 3, size: int64(len(data)), ctime: 1}
	im := &image{path: "/t", c: c, key: k, info: &elfload.Info{Kind: elfload.Static}}
	defer im.c.release()
	cloexec := func(what string, fd int) {
		t.Helper()
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || fl&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s: fd %d flags %#x (%v), want FD_CLOEXEC", what, fd, fl, err)
		}
	}
	for _, what := range []string{"sealed", "from the cache"} {
		fd, en := im.seal("")
		if en != 0 {
			t.Fatalf("seal: %v", en)
		}
		cloexec(what, fd)
		unix.Close(fd)
	}
	execCacheMu.Lock()
	kept, ok := execCache[k]
	delete(execCache, k)
	execCacheMu.Unlock()
	if !ok {
		t.Fatal("the sealed memfd was not cached")
	}
	cloexec("the cache's copy", kept)
	unix.Close(kept)
}
