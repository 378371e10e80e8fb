package dispatch

import (
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// The engine's caches on the open and stat paths: LKL stats of image
// paths (guestpath.StatCache) and read-only opens served from the shadow
// cache (package shadowfd).

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

// openCached serves a read-only open of an image file whose current version
// is already in the shadow cache: one LKL stat (often from the stat cache)
// instead of open + fstat + close, then a reopen of the cached memfd. done
// is false when the open must take the general path (other flags, not a
// regular file, not cached); nothing has happened then.
//
// The stat, with the caller's credentials, checked search permission on
// the way. A caller with CAP_DAC_OVERRIDE may read any regular file, so
// the open it skips could not have failed on permissions; anyone else
// needs read permission, which faccessat2(R_OK, AT_EACCESS) asks LKL for
// (mode bits and ACLs alike). Flags that make open differ from stat
// (creation, truncation, O_PATH, O_DIRECTORY, O_TMPFILE) are left to the
// general path.
func (e *Engine) openCached(r *Request, t guestpath.Target, flags int) (Result, bool) {
	// O_NOATIME needs the file's owner or CAP_FOWNER: LKL's open checks it.
	const general = unix.O_ACCMODE | unix.O_CREAT | unix.O_TRUNC | unix.O_PATH | unix.O_DIRECTORY | unix.O_TMPFILE | unix.O_NOATIME
	if t.Host || flags&general != unix.O_RDONLY {
		return Result{}, false
	}
	// With O_NOFOLLOW a symlink is not S_IFREG. The stat comes from the
	// stat cache while nothing changed LKL (cache.go).
	var st lkl.Stat64
	if e.lklStat(r, t.LKLPath(), flags&unix.O_NOFOLLOW != 0, &st) != 0 {
		return Result{}, false // the general path reports the error
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || !e.Shadows.Fits(st.Size) || generatedSize(&st) {
		return Result{}, false
	}
	hfd, n, hit, err := e.Shadows.OpenCached(&st, flags)
	if !hit {
		return Result{}, false
	}
	if err != nil {
		return fail(err, LKL), true
	}
	if !r.P.creds().vfsRoot {
		if le := lklAccess(r, t.Path, unix.R_OK, unix.AT_EACCESS); le != 0 {
			if shadowfd.Plain(flags) {
				n.Return(hfd, true) // as taken: a spare
			} else {
				n.CloseCopy(hfd)
			}
			return errno(le, LKL), true
		}
	}
	return giveShadow(r, hfd, flags, n), true
}

// A Lender is a guest that shares kbox's fd table (an in-process tier)
// and tells when a description kbox gave it goes: LendFD installs hostfd
// as AddFDReply does and keeps it, to hand it to back.Return once the
// guest's fd of it closes, clean when no call could have copied the
// description or changed its state meanwhile (trap/lend.go). It closes
// hostfd itself when it keeps no more.
type Lender interface {
	LendFD(hostfd int, cloexec bool, back Returner) (int, error)
}

// A Returner takes back a description lent to a guest (shadowfd.Node).
type Returner interface{ Return(hostfd int, clean bool) }

// giveShadow installs hfd, a new description of node n's content for an
// open with flags, in the guest as the open's answer: lent when the guest
// is a Lender and the open Plain, else kbox's copy ends (n.CloseCopy).
func giveShadow(r *Request, hfd, flags int, n *shadowfd.Node) Result {
	if l, ok := r.G.(Lender); ok && shadowfd.Plain(flags) {
		gfd, err := l.LendFD(hfd, flags&unix.O_CLOEXEC != 0, n)
		if err != nil {
			return fail(err, LKL) // LendFD gave hfd back
		}
		return answered(int64(gfd), LKL)
	}
	defer n.CloseCopy(hfd)
	hostStatus(hfd, flags)
	gfd, err := r.G.AddFDReply(hfd, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, LKL)
	}
	return answered(int64(gfd), LKL)
}
