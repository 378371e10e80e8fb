//go:build lkl

package dispatch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// TestStatHintPattern: when a thread's listing prepares stats ahead
// (dispatch/hint_stat.go), and what. The engine's image is mounted
// read-only, its /tmp is not. Not before a stat Go served of an entry of
// the directory listed last; then, for a directory on the read-only
// mount, every entry's lstat answer, the same as Go's, into the stretch
// of memory of the last stat's buffer; after a statx, its statx answers
// for the same flags and mask and ls -l's gets' answers, as Go gives
// them; not for a writable directory's;
// after 8 unused batches no more until the pattern shows again; never
// again on a thread that Go served more prepared stats at a site the tier
// answers at than a batch left; never while an observer watches. The
// open, listing and close of a read-only directory, a readlink there, and
// fcntl's fd flags, leave the stat cache's generation where it was; a
// writable directory's, a readlink there and other fcntl commands move
// it.
func TestStatHintPattern(t *testing.T) {
	g := lklGuest(t)
	rec := &recHints{}
	r := &dispatch.Request{P: engine.Start(unix.Getpid(), "/"), G: g, Hints: rec}
	call := func(nr int, a ...uint64) dispatch.Result {
		t.Helper()
		r.Nr, r.Args = nr, [6]uint64{}
		copy(r.Args[:], a)
		return engine.Dispatch(r)
	}
	gen, wbs := engine.HintClocks()
	const dir = "/opt/tests"
	open := func(p string) uint64 {
		t.Helper()
		res := call(unix.SYS_OPENAT, cwd, g.Str(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		if res.Errno != 0 {
			t.Fatalf("open %s: %v", p, res.Errno)
		}
		return uint64(res.Val)
	}
	dbuf := g.Buf(32 << 10)
	list := func(fd uint64) []string {
		t.Helper()
		call(unix.SYS_LSEEK, fd, 0, unix.SEEK_SET)
		res := call(unix.SYS_GETDENTS64, fd, dbuf, 32<<10)
		if res.Errno != 0 || res.Val <= 0 {
			t.Fatalf("getdents64: %d %v", res.Val, res.Errno)
		}
		return direntNames(g.Bytes(dbuf, int(res.Val)))
	}
	st := g.Buf(int(unsafe.Sizeof(unix.Stat_t{})))
	lstat := func(p string) {
		t.Helper()
		if res := call(unix.SYS_NEWFSTATAT, cwd, g.Str(p), st, unix.AT_SYMLINK_NOFOLLOW); res.Errno != 0 {
			t.Fatalf("lstat %s: %v", p, res.Errno)
		}
	}
	begins := func(want int, what string) {
		t.Helper()
		if rec.begins != want {
			t.Fatalf("%s: %d batches, want %d", what, rec.begins, want)
		}
	}

	fd := open(dir)
	g0 := gen.Load()
	// The i-th entry listed that is neither "." nor "..", which come
	// anywhere in an ext4 directory's hash order (its image's seed).
	entry := func(names []string, i int) string {
		t.Helper()
		for _, n := range names {
			if n != "." && n != ".." {
				if i == 0 {
					return dir + "/" + n
				}
				i--
			}
		}
		t.Fatalf("%s lists too few entries", dir)
		return ""
	}
	names := list(fd)
	begins(0, "before the pattern")
	lstat(entry(names, 0)) // the pattern
	names = list(fd)
	begins(1, "after the pattern")
	if rec.statBuf != st {
		t.Errorf("the batch's buffer is %#x, want the last stat's, %#x", rec.statBuf, st)
	}
	if gen.Load() != g0 {
		t.Errorf("a read-only directory's open and listing moved the stat cache's generation %d -> %d", g0, gen.Load())
	}
	// Every entry, as Go answers its lstat (a request of a tier without
	// Hints).
	plain := &dispatch.Request{P: r.P, G: g}
	var want []string
	for _, n := range names {
		if n != "." && n != ".." {
			want = append(want, dir+"/"+n)
		}
	}
	if len(rec.stats) != len(want) || len(want) < 50 {
		t.Fatalf("prepared %d stats, want %d (one for each entry)", len(rec.stats), len(want))
	}
	for i, ps := range rec.stats {
		if ps.path != want[i] || ps.hash != dispatch.StatHash([]byte(ps.path)) {
			t.Fatalf("prepared %q (hash %#x), want %q", ps.path, ps.hash, want[i])
		}
		plain.Nr, plain.Args = unix.SYS_NEWFSTATAT, [6]uint64{cwd, g.Str(ps.path), st, unix.AT_SYMLINK_NOFOLLOW}
		if res := engine.Dispatch(plain); res.Errno != 0 {
			t.Fatalf("lstat %s: %v", ps.path, res.Errno)
		}
		got := unsafe.Slice((*byte)(unsafe.Pointer(&ps.a.St)), unsafe.Sizeof(ps.a.St))
		if !ps.a.HasSt || ps.a.HasStx || !bytes.Equal(got, g.Bytes(st, len(got))) || ps.a.Lnk != (ps.a.St.Mode&unix.S_IFMT == unix.S_IFLNK) {
			t.Fatalf("prepared for %s: %+v (link %v), Go answers %x", ps.path, ps.a.St, ps.a.Lnk, g.Bytes(st, len(got)))
		}
	}
	// A statx of an entry: the next listing prepares statx answers of
	// its flags and mask, and ls -l's gets' answers after it.
	sx := g.Buf(256)
	const sxFlags, sxMask = unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT, unix.STATX_BASIC_STATS
	if res := call(unix.SYS_STATX, cwd, g.Str(want[1]), sxFlags, sxMask, sx); res.Errno != 0 {
		t.Fatalf("statx %s: %v", want[1], res.Errno)
	}
	// ls -l's gets of it: LKL's answers, learned (xattr_facts.go)
	call(unix.SYS_LGETXATTR, g.Str(want[1]), g.Str(dispatch.HintNames[0]), g.Buf(64), 64)
	call(unix.SYS_GETXATTR, g.Str(want[1]), g.Str(dispatch.HintNames[1]), g.Buf(64), 64)
	rec.stats = nil
	list(fd)
	if k := rec.statx; !k.On || k.Flags != sxFlags || k.Mask != sxMask || len(rec.stats) != len(want) {
		t.Fatalf("after a statx: kind %+v, %d prepared; want %#x %#x, %d", k, len(rec.stats), sxFlags, sxMask, len(want))
	}
	withXattr := 0
	for _, ps := range rec.stats {
		plain.Nr, plain.Args = unix.SYS_STATX, [6]uint64{cwd, g.Str(ps.path), sxFlags, sxMask, sx}
		if res := engine.Dispatch(plain); res.Errno != 0 {
			t.Fatalf("statx %s: %v", ps.path, res.Errno)
		}
		if !ps.a.HasSt || !ps.a.HasStx || !bytes.Equal(ps.a.Stx[:], g.Bytes(sx, 256)) {
			t.Fatalf("prepared statx for %s: %x, Go answers %x", ps.path, ps.a.Stx[:152], g.Bytes(sx, 152))
		}
		if ps.a.HasXattr {
			withXattr++
			for i, name := range dispatch.HintNames {
				plain.Nr, plain.Args = unix.SYS_LGETXATTR, [6]uint64{g.Str(ps.path), g.Str(name), g.Buf(64), 64}
				if en := engine.Dispatch(plain).Errno; ps.a.Xattr[i][1] != 0 && ps.a.Xattr[i][1] != en {
					t.Fatalf("prepared lgetxattr %s of %s: %v, Go answers %v", name, ps.path, ps.a.Xattr[i][1], en)
				}
			}
		}
	}
	if withXattr == 0 {
		t.Errorf("no entry of %s prepared with ls -l's gets' answers", dir)
	}

	g1 := gen.Load()
	call(unix.SYS_FCNTL, fd, unix.F_SETFD, unix.FD_CLOEXEC)
	call(unix.SYS_CLOSE, fd)
	if res := call(unix.SYS_READLINKAT, cwd, g.Str("/bin"), g.Buf(64), 64); res.Errno != 0 {
		t.Fatalf("readlink /bin: %v", res.Errno)
	}
	if gen.Load() != g1 {
		t.Errorf("F_SETFD, the close of a read-only directory and a readlink there moved the generation %d -> %d", g1, gen.Load())
	}

	// A writable directory (/tmp): its listing prepares nothing, and the
	// access time it may give the directory moves the clocks the tier
	// compares (the write-backs': shadowfd.GaveAtime), not the
	// generation.
	tmp := fmt.Sprintf("/tmp/stathint-%d", os.Getpid())
	if res := call(unix.SYS_MKDIRAT, cwd, g.Str(tmp), 0o755); res.Errno != 0 {
		t.Fatalf("mkdir: %v", res.Errno)
	}
	for i := range 3 {
		res := call(unix.SYS_OPENAT, cwd, g.Str(fmt.Sprintf("%s/f%d", tmp, i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		call(unix.SYS_CLOSE, uint64(res.Val))
	}
	tfd := open(tmp)
	lstat(tmp + "/f0")
	n := rec.begins
	g2, w2 := gen.Load(), wbs.Load()
	list(tfd)
	begins(n, "a writable directory")
	if gen.Load() != g2 || wbs.Load() == w2 {
		t.Errorf("a writable directory's listing: generation %d -> %d, write-backs %d -> %d; want the second moved only", g2, gen.Load(), w2, wbs.Load())
	}
	g3 := gen.Load()
	call(unix.SYS_FCNTL, tfd, unix.F_SETFL, unix.O_NONBLOCK)
	if gen.Load() == g3 {
		t.Errorf("F_SETFL left the generation where it was")
	}
	call(unix.SYS_SYMLINKAT, g.Str("f0"), cwd, g.Str(tmp+"/l"))
	g4 := gen.Load()
	if res := call(unix.SYS_READLINKAT, cwd, g.Str(tmp+"/l"), g.Buf(64), 64); res.Errno != 0 || gen.Load() == g4 {
		t.Errorf("a readlink in a writable directory: %v, the generation %d -> %d", res.Errno, g4, gen.Load())
	}
	call(unix.SYS_CLOSE, tfd)

	// Unused: 8 batches, then none until the pattern shows again.
	fd = open(dir)
	lstat(entry(names, 2))
	n = rec.begins
	for range 10 {
		list(fd)
	}
	begins(n+8, "ten listings, their stats unused")
	lstat(entry(names, 3))
	rec.used = true
	for range 10 {
		list(fd)
	}
	begins(n+8+10, "used batches")

	// Watched: nothing prepared.
	engine.Observe = func(*dispatch.Request, *dispatch.Result, time.Duration) {}
	list(fd)
	engine.Observe = nil
	begins(n+18, "an observer watching")

	// Go serves, where the tier answers, more of a batch's entries than
	// it left unprepared, and none was used: off for good.
	rec.used, rec.ahead = false, true
	list(fd)
	for _, p := range want[:6] {
		lstat(p)
	}
	list(fd) // the last batch: Go served them, the tier used none
	begins(n+20, "Go serving prepared stats")
	list(fd)
	lstat(want[7])
	list(fd)
	begins(n+20, "after Go served prepared stats")
	call(unix.SYS_CLOSE, fd)
}

// direntNames returns the names in a getdents64 buffer.
func direntNames(b []byte) []string {
	var out []string
	for off := 0; off+19 < len(b); {
		reclen := int(binary.LittleEndian.Uint16(b[off+16:]))
		name := b[off+19 : off+reclen]
		out = append(out, string(name[:bytes.IndexByte(name, 0)]))
		off += reclen
	}
	return out
}
