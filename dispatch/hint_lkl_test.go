//go:build lkl

package dispatch_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// recHints is a tier's Hints that records what it is given.
type recHints struct {
	arms  []dispatch.XattrHint
	used  bool // what ArmXattr and StatBegin report of the answers before
	ahead bool // what Ahead reports
	// the stats prepared: StatBegin's calls, its last buffer, StatAdd's
	begins  int
	statBuf uint64
	statx   dispatch.StatxKind
	stats   []preparedStat
}

func (h *recHints) ArmXattr(x *dispatch.XattrHint) bool {
	if x != nil {
		h.arms = append(h.arms, *x)
	}
	return h.used
}

func (h *recHints) Ahead() bool { return h.ahead }

// StatBegin and StatAdd record the stats prepared (hint_stat.go).
func (h *recHints) StatBegin(dir string, gen, wb, buf uint64, sx dispatch.StatxKind) (bool, bool) {
	h.begins++
	h.statBuf, h.statx = buf, sx
	return h.used, true
}

func (h *recHints) StatAdd(hash uint64, path []byte, a *dispatch.StatAnswers) bool {
	h.stats = append(h.stats, preparedStat{string(path), *a, hash})
	return true
}

type preparedStat struct {
	path string
	a    dispatch.StatAnswers
	hash uint64
}

// TestXattrHintPattern: when a thread's statx prepares answers ahead
// (dispatch/hint.go). Not before a get answered from facts follows a
// statx of its path; then with the answers facts give, for a plain image
// path named from the cwd or absolutely; after 8 unused preparations no
// more until the pattern shows again; never again on a thread whose
// prepared answer Go had to give at a site the tier answers at; never
// while an observer watches.
func TestXattrHintPattern(t *testing.T) {
	g := lklGuest(t)
	rec := &recHints{}
	r := &dispatch.Request{P: engine.Start(unix.Getpid(), "/"), G: g, Hints: rec}
	call := func(nr int, a ...uint64) unix.Errno {
		t.Helper()
		r.Nr, r.Args = nr, [6]uint64{}
		copy(r.Args[:], a)
		return engine.Dispatch(r).Errno
	}
	dir := fmt.Sprintf("/tmp/hint-%d", os.Getpid())
	path := func(i int) string { return fmt.Sprintf("%s/f%d", dir, i) }
	if en := call(unix.SYS_MKDIRAT, cwd, g.Str(dir), 0o755); en != 0 {
		t.Fatalf("mkdir: %v", en)
	}
	for i := 0; i < 40; i++ {
		fd := engine.Dispatch(&dispatch.Request{Nr: unix.SYS_OPENAT, Args: [6]uint64{cwd, g.Str(path(i)), unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, 0o644}, P: r.P, G: g})
		if fd.Errno != 0 {
			t.Fatalf("create %s: %v", path(i), fd.Errno)
		}
		call(unix.SYS_CLOSE, uint64(fd.Val))
	}
	call(unix.SYS_SYMLINKAT, g.Str("f0"), cwd, g.Str(dir+"/l"))
	sx := g.Buf(256)
	statx := func(p string) {
		t.Helper()
		if en := call(unix.SYS_STATX, cwd, g.Str(p), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, sx); en != 0 {
			t.Fatalf("statx %s: %v", p, en)
		}
	}
	gets := func(p string) {
		t.Helper()
		for _, q := range []struct {
			nr   int
			name string
		}{{unix.SYS_LGETXATTR, "security.selinux"}, {unix.SYS_GETXATTR, "system.posix_acl_access"}} {
			if en := call(q.nr, g.Str(p), g.Str(q.name), g.Buf(64), 64); en != unix.ENODATA {
				t.Fatalf("%s of %s: %v, want ENODATA", q.name, p, en)
			}
		}
	}
	arms := func(want int, what string) {
		t.Helper()
		if len(rec.arms) != want {
			t.Fatalf("%s: %d preparations, want %d", what, len(rec.arms), want)
		}
	}

	statx(path(0))
	gets(path(0)) // LKL answers: kbox learns
	arms(0, "before the pattern")
	statx(path(1))
	gets(path(1)) // answered from facts: the pattern
	arms(0, "the pattern's own statx")
	statx(path(2))
	arms(1, "after the pattern")
	h := rec.arms[0]
	if h.Path != path(2) || h.Ans[0][1] != unix.ENODATA || h.Ans[1][0] != unix.ENODATA || h.Ans[0][0] != unix.ENODATA || h.Ans[1][1] != unix.ENODATA {
		t.Fatalf("prepared %+v, want ENODATA for %s's names in both forms", h, path(2))
	}

	// Unused: 8 preparations, then none.
	for i := 3; i < 12; i++ {
		statx(path(i))
	}
	arms(8, "eight unused preparations")

	// The pattern again; used answers keep the thread preparing.
	gets(path(11))
	rec.used = true
	for i := 12; i < 30; i++ {
		statx(path(i))
	}
	arms(8+18, "used preparations")

	// A symlink: the followed form's answer is not the link's.
	statx(dir + "/l")
	gets(dir + "/l") // learns what a symlink answers
	statx(dir + "/l")
	if h := rec.arms[len(rec.arms)-1]; h.Path != dir+"/l" || h.Ans[0][1] != unix.ENODATA || h.Ans[0][0] != 0 || h.Ans[1][0] != 0 {
		t.Errorf("prepared for a symlink: %+v, want no answer to getxattr (it follows the link)", h)
	}
	n := len(rec.arms)

	// Relative to a directory fd: the gets would name another file.
	dfd := engine.Dispatch(&dispatch.Request{Nr: unix.SYS_OPENAT, Args: [6]uint64{cwd, g.Str(dir), unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC}, P: r.P, G: g})
	if dfd.Errno != 0 {
		t.Fatalf("open %s: %v", dir, dfd.Errno)
	}
	call(unix.SYS_STATX, uint64(dfd.Val), g.Str("f30"), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, sx)
	call(unix.SYS_CLOSE, uint64(dfd.Val))
	arms(n, "statx relative to a directory fd")

	// Watched: nothing prepared.
	engine.Observe = func(*dispatch.Request, *dispatch.Result, time.Duration) {}
	statx(path(31))
	engine.Observe = nil
	arms(n, "an observer watching")

	// Go gives an answer the tier had at a site it answers at: off.
	statx(path(32))
	arms(n+1, "unwatched again")
	rec.ahead = true
	gets(path(32))
	for i := 33; i < 36; i++ {
		statx(path(i))
		gets(path(i))
	}
	arms(n+1, "after Go gave a prepared answer")
}
