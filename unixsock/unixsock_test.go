package unixsock

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSetNames: a bound node gives a new O_PATH fd of its host name each
// time (the caller's to close); binding a node again replaces its fd;
// Forget and Close close what the Set holds.
func TestSetNames(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) int {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	s := New(nil, false)
	if s.Any() {
		t.Fatal("a new Set has names")
	}
	k := Key{Dev: 1, Ino: 2}
	if _, ok := s.Open(k); ok {
		t.Fatal("an unbound node opens")
	}
	a := open("a")
	s.Bound(k, a)
	fd, ok := s.Open(k)
	if !ok || fd == a {
		t.Fatalf("Open = %d, %v: want a new fd", fd, ok)
	}
	unix.Close(fd)
	b := open("b")
	s.Bound(k, b) // the node bound again: a is closed
	if _, err := unix.FcntlInt(uintptr(a), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the replaced fd is still open: %v", err)
	}
	s.Forget(k)
	if _, err := unix.FcntlInt(uintptr(b), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("a forgotten node's fd is still open: %v", err)
	}
	if s.Any() {
		t.Error("names left after Forget")
	}
	c := open("c")
	s.Bound(Key{Dev: 1, Ino: 3}, c)
	s.Close()
	if _, err := unix.FcntlInt(uintptr(c), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("Close left an fd open: %v", err)
	}
	var none *Set
	if none.Any() {
		t.Error("a nil Set has names")
	}
	none.Close()
	if _, err := (*Binder)(nil).OpenIPC("shm"); err != unix.EPERM {
		t.Errorf("no binder: %v, want EPERM", err)
	}
}
