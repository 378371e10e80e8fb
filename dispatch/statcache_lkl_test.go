//go:build lkl

package dispatch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// TestOpenCloseKeepsStatCache: a read-only open and close of a cached
// image file, repeated, leaves the stat cache valid (dispatch/cache.go),
// closed as the in-process tiers close (the engine first, FDGuard, then
// the host), while a change through another path to the same file, and
// the close of an LKL file, still make it stale.
func TestOpenCloseKeepsStatCache(t *testing.T) {
	g := lklGuest(t)
	p := engine.Start(unix.Getpid(), "/")
	call := func(what string, nr int, a ...uint64) int64 {
		t.Helper()
		var args [6]uint64
		copy(args[:], a)
		c := g.Dispatch(engine, &dispatch.Request{Nr: nr, Args: args, P: p})
		if c.Errno != 0 {
			t.Fatalf("%s: %v", what, c.Errno)
		}
		return c.Val
	}
	closeInProc := func(fd int64) {
		t.Helper()
		r := &dispatch.Request{Nr: unix.SYS_CLOSE, Args: [6]uint64{uint64(fd)}, P: p, G: g}
		if res := engine.Dispatch(r); res.Errno != 0 {
			t.Fatalf("close %d: %v", fd, res.Errno)
		} else if res.Action == dispatch.Continue {
			call("host close", unix.SYS_CLOSE, uint64(fd))
		}
	}
	dir := fmt.Sprintf("/tmp/statcache-%d", os.Getpid())
	f, l := g.Str(dir+"/f"), g.Str(dir+"/l")
	call("mkdir", unix.SYS_MKDIRAT, cwd, g.Str(dir), 0o755)
	fd := call("create", unix.SYS_OPENAT, cwd, f, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	call("write", unix.SYS_WRITE, uint64(fd), g.Str("hello"), 5)
	closeInProc(fd)
	call("link", unix.SYS_LINKAT, cwd, f, cwd, l, 0)

	// The first opens take the general path (the shadow cache serves an
	// open once the node is written back and its content's change time
	// is older than a clock tick), the later ones the shadow cache:
	// neither moves the generation.
	gen := engine.StatGen()
	for range 50 {
		closeInProc(call("open", unix.SYS_OPENAT, cwd, f, unix.O_RDONLY|unix.O_CLOEXEC))
		time.Sleep(time.Millisecond)
	}
	if now := engine.StatGen(); now != gen {
		t.Errorf("50 read-only opens and closes moved the stat cache's generation from %d to %d", gen, now)
	}

	// Nor do the other calls that leave LKL as it was (Pure, OwnChange):
	// a read-only open of a directory (a virtual fd), a chdir to the
	// working directory, the umask, the fd limit, and a dup2 between host
	// fds as the in-process tiers make it (the engine first). A dup2 onto
	// a virtual fd (an LKL file's last close) moves it, and so does a
	// chdir elsewhere (a relative path names another file: hint.go).
	dup2 := func(from, to int) dispatch.Result {
		t.Helper()
		r := &dispatch.Request{Nr: unix.SYS_DUP2, Args: [6]uint64{uint64(from), uint64(to)}, P: p, G: g}
		res := engine.Dispatch(r)
		if res.Errno != 0 {
			t.Fatalf("dup2 %d %d: %v", from, to, res.Errno)
		}
		return res
	}
	var pfd [2]int
	if err := unix.Pipe2(pfd[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd[0])
	defer unix.Close(pfd[1])
	gen = engine.StatGen()
	d1 := call("open dir", unix.SYS_OPENAT, cwd, g.Str(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	d2 := call("open dir again", unix.SYS_OPENAT, cwd, g.Str(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	call("chdir", unix.SYS_CHDIR, g.Str("/"))
	call("umask", unix.SYS_UMASK, 0o22)
	call("prlimit", unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0, g.Buf(16))
	if res := dup2(pfd[0], pfd[1]); res.Action != dispatch.Continue {
		t.Fatalf("dup2 between host fds: %+v, want it continued", res)
	}
	if now := engine.StatGen(); now != gen {
		t.Errorf("read-only opens of a directory, chdir to the cwd, umask, prlimit64 and a dup2 of host fds moved the stat cache's generation from %d to %d", gen, now)
	}
	dup2(int(d1), int(d2))
	if engine.StatGen() == gen {
		t.Errorf("a dup2 onto a virtual fd left the stat cache's generation at %d", gen)
	}
	gen = engine.StatGen()
	call("chdir elsewhere", unix.SYS_CHDIR, g.Str(dir))
	if engine.StatGen() == gen {
		t.Errorf("a chdir to another directory left the stat cache's generation at %d", gen)
	}
	call("chdir back", unix.SYS_CHDIR, g.Str("/"))
	closeInProc(d2)
	closeInProc(d1)

	// Lookups that find nothing to change: read-only opens of a missing
	// file, a readlink of what is no symlink. A readlink of a symlink
	// may move its access time.
	missing := g.Str(dir + "/missing")
	try := func(nr int, a ...uint64) unix.Errno {
		var args [6]uint64
		copy(args[:], a)
		return g.Dispatch(engine, &dispatch.Request{Nr: nr, Args: args, P: p}).Errno
	}
	gen = engine.StatGen()
	for range 5 {
		if en := try(unix.SYS_OPENAT, cwd, missing, unix.O_RDONLY|unix.O_CLOEXEC); en != unix.ENOENT {
			t.Fatalf("open of a missing file: %v, want ENOENT", en)
		}
	}
	if en := try(unix.SYS_READLINKAT, cwd, f, g.Buf(64), 64); en != unix.EINVAL {
		t.Fatalf("readlink of a regular file: %v, want EINVAL", en)
	}
	if now := engine.StatGen(); now != gen {
		t.Errorf("failed opens and a readlink of a regular file moved the stat cache's generation from %d to %d", gen, now)
	}
	sl := g.Str(dir + "/sl")
	call("symlink", unix.SYS_SYMLINKAT, g.Str("f"), cwd, sl)
	gen = engine.StatGen()
	call("readlink", unix.SYS_READLINKAT, cwd, sl, g.Buf(64), 64)
	if engine.StatGen() == gen {
		t.Errorf("a readlink of a symlink left the stat cache's generation at %d", gen)
	}
	call("unlink", unix.SYS_UNLINKAT, cwd, sl, 0)

	// A change through the other name: an append and a chmod.
	fd = call("open link", unix.SYS_OPENAT, cwd, l, unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC)
	call("append", unix.SYS_WRITE, uint64(fd), g.Str("+more"), 5)
	closeInProc(fd)
	call("chmod link", unix.SYS_FCHMODAT, cwd, l, 0o600)
	st := g.Buf(256)
	call("stat", unix.SYS_NEWFSTATAT, cwd, f, st, 0)
	var s unix.Stat_t
	if err := binary.Read(bytes.NewReader(g.Bytes(st, binary.Size(&s))), binary.LittleEndian, &s); err != nil {
		t.Fatal(err)
	}
	if s.Mode&0o7777 != 0o600 || s.Size != 10 {
		t.Errorf("stat after the change through the link: mode %o size %d, want 600 and 10", s.Mode&0o7777, s.Size)
	}
	fd = call("open after", unix.SYS_OPENAT, cwd, f, unix.O_RDONLY|unix.O_CLOEXEC)
	buf := make([]byte, 32)
	n, err := unix.Pread(int(fd), buf, 0)
	if err != nil || string(buf[:n]) != "hello+more" {
		t.Errorf("read after the change through the link: %q, %v", buf[:n], err)
	}
	closeInProc(fd)

	// On this writable (relatime) mount a directory's listing moves its
	// access time (older than its last change) and leaves the generation:
	// the time goes to the shadows' log, where the stat cache's entry of
	// the directory finds it (cache.go). Nor does the close of a
	// directory, opened read-only, move the generation.
	atime := func() int64 {
		t.Helper()
		call("stat dir", unix.SYS_NEWFSTATAT, cwd, g.Str(dir), st, 0)
		var s unix.Stat_t
		if err := binary.Read(bytes.NewReader(g.Bytes(st, binary.Size(&s))), binary.LittleEndian, &s); err != nil {
			t.Fatal(err)
		}
		return s.Atim.Nano()
	}
	time.Sleep(50 * time.Millisecond) // LKL's clock past the last change
	was := atime()
	d := call("open dir", unix.SYS_OPENAT, cwd, g.Str(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	gen = engine.StatGen()
	call("list", unix.SYS_GETDENTS64, uint64(d), g.Buf(4096), 4096)
	call("rewind", unix.SYS_LSEEK, uint64(d), 0, 0)
	call("list again", unix.SYS_GETDENTS64, uint64(d), g.Buf(4096), 4096)
	closeInProc(d)
	if now := engine.StatGen(); now != gen {
		t.Errorf("two listings of a directory and its close moved the stat cache's generation from %d to %d", gen, now)
	}
	if now := atime(); now <= was {
		t.Errorf("a directory's access time after its listing: %d, before: %d; want the listing's, later", now, was)
	}
	for _, n := range []uint64{f, l} {
		call("unlink", unix.SYS_UNLINKAT, cwd, n, 0)
	}
	call("rmdir", unix.SYS_UNLINKAT, cwd, g.Str(dir), unix.AT_REMOVEDIR)
}
