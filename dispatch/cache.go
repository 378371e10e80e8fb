package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/fdtable"
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
	wb, at := e.Shadows.StatClocks()
	if en, was, hit := e.stats.Get(path, nofollow, wb, cred, st); hit {
		if en == 0 && was != at {
			e.Shadows.AtimeSince(st, was) // a guest's read since
		}
		return en
	}
	gen := e.stats.Gen()
	en := lklStatUncached(path, nofollow, st)
	e.stats.Put(gen, wb, at, cred, path, nofollow, st, en)
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

// changeDone ends a change an OwnChange call made, as the engine ends
// any other's: what was looked up during it is stale, and its inotify
// events go out.
func (e *Engine) changeDone() {
	e.stats.Changed()
	e.notifySweep()
}

// Directories on a read-only mount. A directory's open, listing and
// close move no access time and change nothing else a stat sees when its
// mount is read-only (a --read-only run's image), so they leave the
// stat cache's generation where it is: a walk (find, ls -R) keeps what
// it learned, and what was prepared ahead (hint_stat.go), across the
// directories it opens. A mount or unmount under way, or one since the
// open (a remount may make it writable: the mount epoch, xattr_facts.go),
// ends that.

// On a writable mount a listing may move the directory's access time,
// which changes a stat of the directory and nothing else: the listing
// tells the shadows' access-time log (shadowfd/atime.go) the time LKL's
// inode has after it, one LKL stat, and kbox's stat cache keeps its
// entries, that of the directory taking the new time. A walk on a
// writable image keeps what it learned too. On a noatime or nodiratime
// mount a listing moves nothing.

// statfs's ST_RDONLY, ST_NOATIME, ST_NODIRATIME.
const (
	stRdonly     = 1
	stNoatime    = 0x400
	stNodiratime = 0x800
)

// quietDir returns, plus one, the mount epoch in which LKL fd lfd, a
// directory just opened read-only, was found on a read-only mount
// (quiet), or on a writable one (lazy, shifted, with its kind); 0 when it
// was not.
func (e *Engine) quietDir(lfd int) (quiet, lazy uint64) {
	epoch := e.xfacts.mountEpoch.Load()
	if e.xfacts.mounting.Load() != 0 {
		return 0, 0
	}
	sc := getScratch()
	defer putScratch(sc)
	if _, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(lfd), lkl.PtrOf(&sc.sf), 0, 0, 0, 0); le != 0 {
		return 0, 0
	}
	switch {
	case sc.sf.Flags&stRdonly != 0:
		return epoch + 1, 0
	case sc.sf.Flags&(stNoatime|stNodiratime) != 0:
		return 0, (epoch+1)<<2 | lazyNever
	}
	return 0, (epoch+1)<<2 | lazyLogged
}

// A writable mount's kind, in the low bits of quietDir's lazy.
const (
	lazyLogged = 1 // a listing may move the access time: logged
	lazyNever  = 2 // noatime or nodiratime: a listing moves no time
)

// lazyListing reports whether a listing of f, an LKL directory, is on a
// writable mount found at its open (quietDir), in the current mount
// epoch: listed ends it.
func (e *Engine) lazyListing(f *fdtable.File) bool {
	l := f.Lazy.Load()
	return l != 0 && l>>2 == e.xfacts.mountEpoch.Load()+1 && e.xfacts.mounting.Load() == 0 && f.LKLFd >= 0
}

// listed ends a listing of f (lazyListing) begun in stat cache generation
// gen: the directory's access time, as LKL has it now, goes to the
// shadows' log; a change in the directory meanwhile (another thread's
// create) moves the generation, as does a time that cannot be read.
func (e *Engine) listed(f *fdtable.File, gen uint64) {
	defer e.notifySweep()
	if f.Lazy.Load()&lazyNever == 0 {
		sc := getScratch()
		_, le := lkl.Syscall6(lkl.SysFstat, uintptr(f.LKLFd), lkl.PtrOf(&sc.lst), 0, 0, 0, 0)
		if le == 0 {
			e.Shadows.GaveAtime(&sc.lst)
		}
		putScratch(sc)
		if le != 0 {
			e.stats.Changed()
			return
		}
	}
	if e.stats.Gen() != gen {
		e.stats.Changed()
	}
}

// linkRead reports a readlink of the symlink at LKL path path: its access
// time moves, unless its directory is on a read-only mount. The serving
// thread remembers the last directory it asked LKL about (readOnlyMemo):
// a directory's links are read one after another.
func (e *Engine) linkRead(r *Request, path string) {
	epoch := e.xfacts.mountEpoch.Load()
	dir := path[:max(strings.LastIndexByte(path, '/'), 1)]
	m := &r.roMemo
	if m.epoch != epoch+1 || m.dir != dir {
		sc := getScratch()
		_, le := lklPath(lkl.SysStatfs, 0, dir, [6]uintptr{0, lkl.PtrOf(&sc.sf)})
		*m = readOnlyMemo{epoch: epoch + 1, dir: dir, ro: le == 0 && sc.sf.Flags&stRdonly != 0}
		putScratch(sc)
	}
	if !m.ro || e.xfacts.mounting.Load() != 0 || e.xfacts.mountEpoch.Load() != epoch {
		e.stats.Changed()
	}
}

// readOnlyMemo is whether directory dir was on a read-only mount in
// mount epoch epoch-1 (0: nothing known).
type readOnlyMemo struct {
	epoch uint64
	dir   string
	ro    bool
}

// markQuiet records quiet and lazy (quietDir's) on the virtual fd res,
// an open of LKL fd lfd, gave the guest.
func markQuiet(r *Request, res Result, lfd int, quiet, lazy uint64) {
	if quiet|lazy == 0 || res.Errno != 0 || res.Disp != LKL {
		return
	}
	if ent, ok := r.P.FDs.Get(int(res.Val)); ok && ent.File.LKLFd == lfd {
		ent.File.Quiet.Store(quiet)
		ent.File.Lazy.Store(lazy)
	}
}

// readOnlyFile reports whether f, a virtual fd's file, was opened
// read-only (or O_PATH): its close changes nothing a stat sees.
func readOnlyFile(f *fdtable.File) bool {
	return !f.Host && (f.Flags&unix.O_ACCMODE == unix.O_RDONLY || f.Flags&unix.O_PATH != 0)
}

// isQuiet reports whether f is a directory whose listing and close change
// nothing a stat sees (quietDir, in the current mount epoch).
func (e *Engine) isQuiet(f *fdtable.File) bool {
	q := f.Quiet.Load()
	return q != 0 && q == e.xfacts.mountEpoch.Load()+1 && e.xfacts.mounting.Load() == 0
}
