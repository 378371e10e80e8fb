package guestpath

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// StatCache remembers the results of path stats in LKL while nothing can
// have changed the image.
//
// A stat storm (a shell's PATH search, make, ls -l, git status) asks the
// same paths again and again, and each LKL newfstatat costs about a quarter
// of a stat's time in the supervisor (path walk and allocations in the
// KASAN-instrumented kernel). LKL's state changes only through kbox: the
// syscalls it dispatches, shadow write-backs and the dup2 bridges' pumps.
// So every entry carries the generation it was filled in, and a generation
// moves on with every dispatched syscall that may change what a stat
// sees (neither Pure nor OwnChange in dispatch's syscall table; an
// OwnChange call moves it when it did change something: an exec that
// closed a file open for writing) and every pump transfer; entries
// carry the shadows' changes too (write-backs), and their access-time
// clock, by which an entry takes the access time a guest's read, a
// listing or an exec gave the file since (shadowfd/atime.go): an entry
// is only ever used while LKL would answer the same.
// Negative results (ENOENT, ENOTDIR, ...) are kept too. 4096 slots
// (about 800 KB, touched only as they fill): git status after a walk of
// its 2000-file repository and .git (4,300 paths) finds 43% of its
// lstats there. A walk's entries fall on every page of the table, so a
// larger one costs a long walk (find /usr) a first touch of each of its
// pages. A result depends on the caller's credentials (search permission on the way: EACCES for
// one, a stat for another), so entries are keyed by the id of the
// credentials LKL checked with (lkl.Cred.ID): processes with the same
// credentials share entries, others do not see them. Host routes and binds
// are never cached: the host changes them behind kbox's back.
//
// The seccomp tier serves on one thread; the lock is uncontended there. It
// is per engine, held only for a slot copy.
type StatCache struct {
	gen   atomic.Uint64
	mu    sync.Mutex
	slots [statSlots]statSlot
}

const statSlots = 4096

type statSlot struct {
	gen      uint64 // 0: empty
	wb       uint64 // the shadows' changes when filled (shadowfd.StatClocks)
	at       uint64 // and their access-time clock
	cred     uint64 // the credentials' id (lkl.Cred.ID)
	path     string
	nofollow bool
	errno    unix.Errno
	st       lkl.Stat64
}

// Changed starts a new generation: every entry is stale.
func (c *StatCache) Changed() { c.gen.Add(1) }

// Gen returns the current generation, to give Put.
func (c *StatCache) Gen() uint64 { return c.gen.Load() }

func statHash(p string, nofollow bool, cred uint64) uint32 {
	h := maphash.String(statSeed, p) ^ cred*0x9e3779b97f4a7c15
	if nofollow {
		h = ^h
	}
	return uint32(h^h>>32) % statSlots
}

// statSeed seeds statHash (the runtime's hash: AES where the CPU has it,
// about a quarter of a byte-wise hash's time for a path).
var statSeed = maphash.MakeSeed()

// Get copies a current entry for path into st, and returns the
// access-time clock it was filled at: the caller brings st's access time
// up to date (shadowfd.AtimeSince). A stat that follows a final symlink
// takes the entry of one that does not (lstat's) when that found no
// symlink: both looked up the same file.
func (c *StatCache) Get(path string, nofollow bool, wb, cred uint64, st *lkl.Stat64) (en unix.Errno, at uint64, hit bool) {
	gen := c.gen.Load() + 1 // +1: slot generation 0 means empty
	s := &c.slots[statHash(path, nofollow, cred)]
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.gen == gen && s.wb == wb && s.cred == cred && s.nofollow == nofollow && s.path == path {
		*st = s.st
		return s.errno, s.at, true
	}
	if nofollow {
		return 0, 0, false
	}
	s = &c.slots[statHash(path, true, cred)]
	if s.gen != gen || s.wb != wb || s.cred != cred || !s.nofollow || s.path != path || s.errno != 0 || s.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return 0, 0, false
	}
	*st = s.st
	return 0, s.at, true
}

// Put records a result obtained in generation gen, with the shadows'
// changes wb and access-time clock at (all read before the LKL call, so
// that a change meanwhile makes the entry stale at once, or older than
// an access time given meanwhile).
func (c *StatCache) Put(gen, wb, at, cred uint64, path string, nofollow bool, st *lkl.Stat64, en unix.Errno) {
	s := &c.slots[statHash(path, nofollow, cred)]
	c.mu.Lock()
	defer c.mu.Unlock()
	s.gen, s.wb, s.at, s.cred, s.path, s.nofollow, s.errno = gen+1, wb, at, cred, path, nofollow, en
	if en == 0 {
		s.st = *st
	}
}

// GenCounter returns the generation's counter, for code that compares it
// without calling Gen (an in-process tier's C entry, dispatch/hint.go).
func (c *StatCache) GenCounter() *atomic.Uint64 { return &c.gen }
