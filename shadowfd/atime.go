package shadowfd

import (
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The access times kbox gives LKL's inodes (propagateAtime), and those a
// directory's listing or an exec's read gives them (GaveAtime), change
// what a stat of the file shows, and nothing else. The dispatch stat cache
// (guestpath.StatCache) keeps its entries across them: it keys entries
// by StatClocks' changes, which every write-back moves but an access time
// given does not, and notes the access-time clock with each; an entry
// older than that clock takes the time LKL's inode was given since, from
// this log (AtimeSince). The in-process tiers' prepared answers and the
// facts kept beside the cache still compare WriteBacks, which both move.

// atimeLog is what access times kbox gave LKL's inodes, by inode.
type atimeLog struct {
	// changes counts write-backs, and the log's clearings.
	changes atomic.Uint64
	// clock counts the access times given.
	clock atomic.Uint64
	mu    sync.RWMutex           // stats read the log at once
	given map[nodeKey]atimeGiven // under mu
}

// atimeGiven is the access time an inode was last given, at clock.
type atimeGiven struct {
	at    unix.Timespec
	clock uint64
}

// atimeLogMax bounds the log: beyond it, it starts again empty, and
// changes moves (every older entry of the stat cache is stale).
const atimeLogMax = 16384

// gave records that inode k was given access time at, once LKL's inode
// has it: the clock moves then, so that a stat taken before, or while
// the time was given, reads an older clock. It reports whether the log
// changed: not for the time k was last given already (a directory
// listed again, in several calls). ok false: LKL's time is unknown, and
// every entry of the cache goes stale.
func (l *atimeLog) gave(k nodeKey, at unix.Timespec, ok bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, seen := l.given[k]; ok && seen && g.at == at {
		return false
	}
	if !ok || len(l.given) >= atimeLogMax {
		l.given = nil
		l.changes.Add(1)
		if !ok {
			return true
		}
	}
	if l.given == nil {
		l.given = map[nodeKey]atimeGiven{}
	}
	l.given[k] = atimeGiven{at, l.clock.Add(1)}
	return true
}

// StatClocks returns the clocks a stat of an LKL file is current by:
// changes, which moves with anything but an access time kbox gave LKL's
// inode, and the access-time clock (AtimeSince).
func (m *Manager) StatClocks() (changes, atimes uint64) {
	return m.atimes.changes.Load(), m.atimes.clock.Load()
}

// AtimeSince brings st, an LKL stat taken when the access-time clock read
// since and nothing else changed, up to date: the access time kbox gave
// its inode after it, if any.
func (m *Manager) AtimeSince(st *lkl.Stat64, since uint64) {
	l := &m.atimes
	l.mu.RLock()
	g, ok := l.given[nodeKey{st.Dev, st.Ino}]
	l.mu.RUnlock()
	if ok && g.clock > since {
		st.Atime, st.AtimeNsec = g.at.Sec, uint64(g.at.Nsec)
	}
}

// GaveAtime records the access time LKL's inode of st has after a read
// kbox made for a guest through LKL (a directory's listing, an exec's
// read of its program): st is its stat since. The write-back counter
// moves only with a time not given already.
func (m *Manager) GaveAtime(st *lkl.Stat64) {
	if m.atimes.gave(nodeKey{st.Dev, st.Ino}, unix.Timespec{Sec: st.Atime, Nsec: int64(st.AtimeNsec)}, true) {
		m.writeBacks.Add(1)
	}
}
