package dispatch

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// lklStat stats an image path in LKL with the caller's credentials,
// through the cache (guestpath.StatCache).
func (e *Engine) lklStat(r *Request, path string, nofollow bool, st *lkl.Stat64) unix.Errno {
	var cred uint64
	if r.P != nil {
		cred = r.P.creds().fs.ID()
	}
	wb := e.Shadows.WriteBacks()
	if en, hit := e.stats.Get(path, nofollow, wb, cred, st); hit {
		return en
	}
	gen := e.stats.Gen()
	en := lklStatUncached(path, nofollow, st)
	e.stats.Put(gen, wb, cred, path, nofollow, st, en)
	return en
}
