package dispatch

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNeededLibs: a dynamic host program names libc; garbage, a cut ELF
// and an empty file name nothing, without a panic.
func TestNeededLibs(t *testing.T) {
	f, err := os.Open("/bin/true")
	if err != nil {
		t.Skipf("no /bin/true: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	// glibc's libc.so.6, musl's libc.musl-ARCH.so.1; read from the file,
	// as an exec's warm-up reads its memfd.
	if libs := neededLibs(f); !slices.ContainsFunc(libs, func(s string) bool { return strings.HasPrefix(s, "libc.") }) {
		t.Errorf("/bin/true needs %q, want libc", libs)
	}
	for name, in := range map[string][]byte{
		"empty":   nil,
		"garbage": []byte("\x7fELF\x02\x01\x01garbage garbage garbage garbage garbage garbage garbage"),
		"cut":     b[:200],
		"script":  []byte("#!/bin/sh\necho hi\n"),
	} {
		if libs := neededLibs(bytes.NewReader(in)); len(libs) != 0 {
			t.Errorf("%s: %q, want none", name, libs)
		}
	}
}

// TestTakePrewarmed: the first exec takes the memfd Prewarm read of a
// file only under the key the exec finds (the same file, unchanged); it
// waits for Prewarm's reads only for Prewarm's program; what it leaves is
// closed by dropPrewarmed.
func TestTakePrewarmed(t *testing.T) {
	memfd := func() content {
		c, en := readMemfd("kbox-exec:/t", 4, func(int) bool { return false }, func(b []byte, off int) (int, unix.Errno) {
			return copy(b, "\x7fELF"[off:]), 0
		})
		if en != 0 {
			t.Fatalf("readMemfd: %v", en)
		}
		return c
	}
	k := execKey{dev: 1, ino: 2, size: 4, ctime: 100}
	changed := k
	changed.ctimeNs = 1
	e := &Engine{}
	pw := &prewarm{path: "/bin/p", done: make(chan struct{})}
	e.prewarmed.Store(pw)
	prog, ld := memfd(), memfd()
	go func() {
		time.Sleep(20 * time.Millisecond)
		pw.files = append(pw.files, prewarmed{"/bin/p", k, prog}, prewarmed{"/lib/ld", k, ld})
		close(pw.done)
	}()
	// Not Prewarm's program: no wait (a take that waited would get it).
	if _, ok := e.takePrewarmed("/lib/ld", k); ok {
		t.Fatal("took a file before Prewarm's reads ended")
	}
	c, ok := e.takePrewarmed("/bin/p", k) // waits for the reads
	if !ok || c.fd != prog.fd || string(c.b) != "\x7fELF" {
		t.Fatalf("the program: %v %+v", ok, c)
	}
	if _, ok := e.takePrewarmed("/bin/p", k); ok {
		t.Error("took the program twice")
	}
	if _, ok := e.takePrewarmed("/lib/ld", changed); ok {
		t.Error("took the loader under another key")
	}
	c.release()
	e.dropPrewarmed()
	if e.prewarmed.Load() != nil {
		t.Error("dropPrewarmed left the hand-over")
	}
	if _, ok := e.takePrewarmed("/lib/ld", k); ok {
		t.Error("took the loader after dropPrewarmed")
	}
	// the loader's memfd is closed, on dropPrewarmed's goroutine
	deadline := time.Now().Add(5 * time.Second)
	for _, err := unix.FcntlInt(uintptr(ld.fd), unix.F_GETFD, 0); err != unix.EBADF; _, err = unix.FcntlInt(uintptr(ld.fd), unix.F_GETFD, 0) {
		if time.Now().After(deadline) {
			t.Fatal("the loader's memfd was not closed")
		}
		time.Sleep(time.Millisecond)
	}
}
