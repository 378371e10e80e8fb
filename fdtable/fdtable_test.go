package fdtable

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

func TestTable(t *testing.T) {
	closed := map[int]int{}
	tb := New(1024, 4, func(fd int) { closed[fd]++ })

	a, err := tb.Open(7, "/etc", 0, false)
	if err != nil || a != 1024 {
		t.Fatalf("first fd %d %v", a, err)
	}
	b, _ := tb.Open(8, "/tmp", 0, true)
	if b != 1025 {
		t.Fatalf("second fd %d", b)
	}
	// Fork shares files: the child's close does not close the parent's.
	child := tb.Fork()
	if err := child.Close(a); err != nil {
		t.Fatal(err)
	}
	if closed[7] != 0 {
		t.Fatal("child close closed the shared LKL fd")
	}
	if e, ok := tb.Get(a); !ok || e.File.LKLFd != 7 {
		t.Fatal("parent lost its fd")
	}
	// Exec drops cloexec fds only.
	tb.Exec()
	if _, ok := tb.Get(b); ok {
		t.Error("cloexec fd survived exec")
	}
	if closed[8] != 0 {
		t.Error("fd 8 still referenced by the child, closed early")
	}
	child.CloseAll()
	if closed[8] != 1 {
		t.Errorf("fd 8 closed %d times after its last reference", closed[8])
	}
	// Dup and dup2 share; the file closes with the last fd.
	d, _ := tb.Dup(a, 2000, false)
	if d != 2000 {
		t.Errorf("dup at min 2000 gave %d", d)
	}
	if err := tb.Dup2(a, 1030, false); err != nil {
		t.Fatal(err)
	}
	if err := tb.Dup2(a, 5, false); err != unix.EBADF {
		t.Errorf("dup2 into the host range: %v", err)
	}
	tb.Close(a)
	tb.Close(d)
	if closed[7] != 0 {
		t.Error("closed while fd 1030 still refers to it")
	}
	tb.Close(1030)
	if closed[7] != 1 {
		t.Errorf("closed %d times", closed[7])
	}
	if err := tb.Close(1030); err != unix.EBADF {
		t.Errorf("double close: %v", err)
	}
}

func TestExhaustion(t *testing.T) {
	closed := 0
	tb := New(1024, 3, func(int) { closed++ })
	for i := 0; i < 3; i++ {
		if _, err := tb.Open(i, "/", 0, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.Open(99, "/", 0, false); err != unix.EMFILE {
		t.Fatalf("over the limit: %v", err)
	}
	if closed != 1 {
		t.Error("the refused LKL fd was not closed")
	}
	tb.Close(1025)
	if fd, err := tb.Open(5, "/", 0, false); err != nil || fd != 1025 {
		t.Errorf("after recovery: %d %v", fd, err)
	}
}

func TestCloseRangeAndForkRace(t *testing.T) {
	var closed atomic.Int32
	tb := New(1024, 100, func(int) { closed.Add(1) })
	for i := 0; i < 10; i++ {
		tb.Open(i, "/", 0, false)
	}
	tb.CloseRange(1026, 1029, true)
	if e, _ := tb.Get(1027); !e.Cloexec {
		t.Error("close_range CLOEXEC did not mark fd 1027")
	}
	tb.CloseRange(1030, 1<<30, false)
	if tb.Len() != 6 || closed.Load() != 4 {
		t.Errorf("after close_range: %d fds, %d closed", tb.Len(), closed.Load())
	}
	// Parent and child tables release shared files concurrently (-race).
	child := tb.Fork()
	done := make(chan bool)
	go func() { child.CloseAll(); done <- true }()
	tb.CloseAll()
	<-done
	if closed.Load() != 10 {
		t.Errorf("%d LKL fds closed, want each of 10 exactly once", closed.Load())
	}
}

// TestOpenHost: a host File sits at the lowest free fd at or above its
// minimum, is shared by dups and forks, and its host fd is closed once,
// with the last reference (never through the LKL closer).
func TestOpenHost(t *testing.T) {
	lklClosed := 0
	tb := New(1024, 8, func(int) { lklClosed++ })
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	open := func() bool { _, err := unix.FcntlInt(uintptr(p[1]), unix.F_GETFD, 0); return err == nil }
	tb.Open(7, "/x", 0, false) // 1024
	fd, err := tb.OpenHost(p[1], 1024, true)
	if err != nil || fd != 1025 {
		t.Fatalf("OpenHost at min 1024: %d %v", fd, err)
	}
	if e, ok := tb.Get(fd); !ok || !e.File.Host || e.File.HostFd != p[1] || e.File.LKLFd != -1 || !e.Cloexec {
		t.Fatalf("entry %+v", e)
	}
	d, _ := tb.Dup(fd, 2000, false)
	child := tb.Fork()
	tb.Exec() // drops the cloexec original, keeps the dup
	if _, ok := tb.Get(fd); ok || !open() {
		t.Fatal("exec: cloexec host entry kept, or its fd closed while a dup refers to it")
	}
	tb.Close(d)
	if !open() {
		t.Fatal("host fd closed while the child's table refers to it")
	}
	child.CloseAll()
	if open() {
		t.Error("host fd still open after its last reference")
	}
	if lklClosed != 0 {
		t.Errorf("LKL closer called %d times", lklClosed)
	}
}

// A generated directory lists its entries as linux_dirent64 records,
// resumes where a full buffer stopped, seeks to a record's d_off, and
// makes its entries again when rewound.
func TestListing(t *testing.T) {
	gens := 0
	l := NewListing(func() []Dirent {
		gens++
		return []Dirent{{1, unix.DT_DIR, "."}, {1, unix.DT_DIR, ".."}, {7, unix.DT_LNK, "self"}, {9, unix.DT_DIR, "4242"}}
	})
	if gens != 0 {
		t.Fatal("entries made before the first read")
	}
	names := func(b []byte) (out []string, offs []uint64) {
		for len(b) > 0 {
			reclen := int(b[16]) | int(b[17])<<8
			name := b[19:reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			out = append(out, string(name))
			offs = append(offs, uint64(b[8]))
			b = b[reclen:]
		}
		return out, offs
	}
	if _, err := l.Read(make([]byte, 10)); err != unix.EINVAL {
		t.Errorf("buffer too small for a record: %v", err)
	}
	buf := make([]byte, 56) // two 24-byte records fit, not three
	n, err := l.Read(buf)
	got, offs := names(buf[:n])
	if err != nil || len(got) != 2 || got[0] != "." || offs[1] != 2 {
		t.Fatalf("first read: %v %v %v", got, offs, err)
	}
	buf = make([]byte, 4096)
	if _, err := l.Seek(2, unix.SEEK_SET); err != nil {
		t.Fatal(err)
	}
	n, _ = l.Read(buf)
	got, _ = names(buf[:n])
	if len(got) != 2 || got[0] != "self" || got[1] != "4242" {
		t.Errorf("after seekdir(2): %v", got)
	}
	if n, _ := l.Read(buf); n != 0 {
		t.Errorf("read at the end: %d", n)
	}
	if off, _ := l.Seek(0, unix.SEEK_SET); off != 0 || gens != 1 {
		t.Errorf("rewind: %d, made %d times", off, gens)
	}
	n, _ = l.Read(buf)
	if got, _ = names(buf[:n]); len(got) != 4 || gens != 2 {
		t.Errorf("after rewind: %v, made %d times", got, gens)
	}
	if _, err := l.Seek(0, unix.SEEK_END); err != unix.EINVAL {
		t.Errorf("SEEK_END: %v", err)
	}
	tb := New(1024, 4, func(int) { t.Error("a listing has no LKL fd to close") })
	fd, err := tb.OpenListing(l, "/proc", 0, false)
	if err != nil || fd != 1024 {
		t.Fatal(fd, err)
	}
	fds, ents := tb.Fds()
	if len(fds) != 1 || ents[0].File.Listing != l || ents[0].File.Path != "/proc" {
		t.Errorf("Fds: %v %+v", fds, ents)
	}
	tb.Close(fd)
}
