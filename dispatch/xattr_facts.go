package dispatch

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Extended attributes a file does not have. ls -l asks every file for
// two names after its stat (lgetxattr security.selinux, getxattr
// system.posix_acl_access), which nearly every file lacks: three walks of
// the same path in LKL. Within a run of pure calls (the stat cache's
// generation, cache.go) kbox remembers, per LKL path, what a stat told of
// the file (its filesystem and type) and what one listxattr told of its
// names: none. A get of a security.* or POSIX ACL name of such a file is
// then answered with what LKL answered that filesystem for the same name
// on a file of the same type without extended attributes (ENODATA, or
// EOPNOTSUPP: an ACL of a symlink, a filesystem without ACLs), learned
// from the first such call. Linux's answer depends on nothing else there:
// neither namespace checks the caller's permission on the file (the walk
// that found it did, with the same credentials), and only the mount
// decides whether ACLs exist, so answers learned before a mount or an
// unmount are not used after it. Other names (user.* needs read permission,
// trusted.* CAP_SYS_ADMIN) and every set, remove or list take LKL's call.
// A file with names, or whose list fails, takes the ordinary way too.

// xattrFactSlots is the number of paths remembered: ls asks about a
// directory's entries one after another.
const xattrFactSlots = 256

type xattrFacts struct {
	mu      sync.Mutex
	slots   [xattrFactSlots]xattrFact
	learned map[xattrLearnKey]unix.Errno
	// mountEpoch moves at the start and the end of every mount and
	// unmount, mounting counts those under way: an answer is learned
	// only when none ran during its call, and is kept under the epoch.
	mountEpoch atomic.Uint64
	mounting   atomic.Int32
}

// xattrFact is what kbox knows of the file at path in generation gen.
type xattrFact struct {
	gen, wb, cred uint64
	path          string
	nofollow      bool
	dev           uint64
	mode          uint32
	names         int8 // 0: not asked; 1: none; 2: some
}

// xattrLearnKey is a filesystem, a file type and a name, in a mount
// epoch.
type xattrLearnKey struct {
	epoch uint64
	dev   uint64
	ifmt  uint32
	name  string
}

var xattrFactSeed = maphash.MakeSeed()

func xattrFactSlot(path string, nofollow bool, cred uint64) uint32 {
	h := maphash.String(xattrFactSeed, path) ^ cred*0x9e3779b97f4a7c15
	if nofollow {
		h = ^h
	}
	return uint32(h^h>>32) % xattrFactSlots
}

// factsName reports whether get of name may be answered from facts.
func factsName(name string) bool {
	return strings.HasPrefix(name, "security.") || name == "system.posix_acl_access" || name == "system.posix_acl_default"
}

// factKey is the stat cache's key of a request: its credentials, the
// shadows' write-backs and the generation, read before the call that
// learns something.
func (e *Engine) factKey(r *Request) (cred, wb, gen uint64) {
	if r.P != nil {
		cred = r.P.creds().fs.ID()
	}
	return cred, e.Shadows.WriteBacks(), e.stats.Gen()
}

// noteStatx records the file type and filesystem of a successful statx of
// LKL path path in generation gen (sx is LKL's struct statx).
func (e *Engine) noteStatx(cred, wb, gen uint64, path string, nofollow bool, sx []byte) {
	le := binary.NativeEndian
	if le.Uint32(sx[0:])&unix.STATX_TYPE == 0 {
		return
	}
	mode := uint32(le.Uint16(sx[28:]))
	dev := unix.Mkdev(le.Uint32(sx[136:]), le.Uint32(sx[140:]))
	e.xfacts.put(xattrFact{gen: gen + 1, wb: wb, cred: cred, path: path, nofollow: nofollow, dev: dev, mode: mode})
}

func (f *xattrFacts) put(v xattrFact) {
	s := &f.slots[xattrFactSlot(v.path, v.nofollow, v.cred)]
	f.mu.Lock()
	*s = v
	f.mu.Unlock()
}

// get returns the current fact of path, or false.
func (f *xattrFacts) get(cred, wb, gen uint64, path string, nofollow bool) (xattrFact, bool) {
	s := &f.slots[xattrFactSlot(path, nofollow, cred)]
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.gen == gen+1 && s.wb == wb && s.cred == cred && s.nofollow == nofollow && s.path == path {
		return *s, true
	}
	return xattrFact{}, false
}

// setNames records the answer of a listxattr of a fact's file.
func (f *xattrFacts) setNames(v xattrFact, names int8) {
	s := &f.slots[xattrFactSlot(v.path, v.nofollow, v.cred)]
	f.mu.Lock()
	if s.gen == v.gen && s.wb == v.wb && s.cred == v.cred && s.nofollow == v.nofollow && s.path == v.path {
		s.names = names
	}
	f.mu.Unlock()
}

// mountBegin and mountEnd bracket a mount or unmount, which may change
// whether a filesystem has ACLs: what was learned before is not used
// after.
func (f *xattrFacts) mountBegin() {
	f.mounting.Add(1)
	f.mountEpoch.Add(1)
}

func (f *xattrFacts) mountEnd() {
	f.mountEpoch.Add(1)
	f.mounting.Add(-1)
}

func (f *xattrFacts) answer(k xattrLearnKey) (unix.Errno, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	en, ok := f.learned[k]
	return en, ok
}

func (f *xattrFacts) learn(k xattrLearnKey, en unix.Errno) {
	if f.mounting.Load() != 0 || f.mountEpoch.Load() != k.epoch {
		return
	}
	f.mu.Lock()
	if f.learned == nil || len(f.learned) >= 1024 {
		f.learned = map[xattrLearnKey]unix.Errno{} // older epochs' too
	}
	f.learned[k] = en
	f.mu.Unlock()
}

// xattrGetFromFacts answers get call c of o, an LKL path, from what kbox
// knows of the file: done is false when LKL must be asked; learn, when
// its name is set, is the key under which LKL's answer to a file without
// names is to be kept (learnFromAnswer). Nothing escapes: a per-file call.
func (e *Engine) xattrGetFromFacts(r *Request, c *xattrCall, o *xattrObj) (en unix.Errno, done bool, learn xattrLearnKey) {
	if c.op != xattrGet || o.kind != xattrLKLPath || !factsName(c.name) {
		return 0, false, learn
	}
	epoch := e.xfacts.mountEpoch.Load()
	cred, wb, gen := e.factKey(r)
	if f, ok := e.xattrNoNames(cred, wb, gen, o.path, o.nofollow); ok {
		learn = xattrLearnKey{epoch, f.dev, f.mode & unix.S_IFMT, c.name}
		en, done = e.xfacts.answer(learn)
	}
	r.sawXattrGet(o.path, c.name, o.nofollow, done) // hint.go
	if done {
		return en, true, xattrLearnKey{}
	}
	return 0, false, learn
}

// xattrNoNames returns the current fact of LKL path path when the file
// has no extended attributes: it asks LKL for the file's names when no
// one has yet in this generation.
func (e *Engine) xattrNoNames(cred, wb, gen uint64, path string, nofollow bool) (xattrFact, bool) {
	f, ok := e.xattrFact(cred, wb, gen, path, nofollow)
	if !ok {
		return f, false
	}
	if f.names == 0 {
		form := formPath
		if f.nofollow {
			form = formLink
		}
		n, le := lklPath(lkl.SysListxattr+uintptr(form), 0, f.path, [6]uintptr{0, 0, 0})
		names := int8(2)
		if le == 0 && n == 0 {
			names = 1
		}
		f.names = names
		e.xfacts.setNames(f, names)
	}
	return f, f.names == 1
}

// xattrFact returns the current fact of path: statx's, or one made from
// the stat cache's entry. The file a link-form fact describes is the
// path form's too when it is no symlink (ls asks statx in the link form,
// then getxattr in the path form).
func (e *Engine) xattrFact(cred, wb, gen uint64, path string, nofollow bool) (xattrFact, bool) {
	if f, ok := e.xfacts.get(cred, wb, gen, path, nofollow); ok {
		return f, true
	}
	if !nofollow {
		if f, ok := e.xfacts.get(cred, wb, gen, path, true); ok && f.mode&unix.S_IFMT != unix.S_IFLNK {
			return f, true
		}
	}
	// StatCache.Get of the path form takes the link form's entry of
	// what is no symlink itself.
	var st lkl.Stat64
	sw, _ := e.Shadows.StatClocks() // the stat cache's key; the fact takes no time
	if en, _, hit := e.stats.Get(path, nofollow, sw, cred, &st); !hit || en != 0 {
		return xattrFact{}, false
	}
	f := xattrFact{gen: gen + 1, wb: wb, cred: cred, path: path, nofollow: nofollow, dev: st.Dev, mode: st.Mode}
	e.xfacts.put(f)
	return f, true
}

// learnFromAnswer keeps LKL's answer en to a get of a file without names
// under k, unless k is empty.
func (e *Engine) learnFromAnswer(k xattrLearnKey, en unix.Errno) {
	if k.name != "" && (en == unix.ENODATA || en == unix.EOPNOTSUPP) {
		e.xfacts.learn(k, en)
	}
}
