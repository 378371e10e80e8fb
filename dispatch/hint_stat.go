package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Stats prepared ahead (hint.go has the pattern's other half, ls -l's
// gets).
//
// A walk that stats what it lists (find, du, busybox's recursive
// actions) lists a directory, then lstats each entry by the directory's
// path, a slash and the entry's name. Each stat pays the way into Go,
// the path's reading and resolution and a full-path walk in LKL. Once a
// thread has shown the pattern (a stat Go served of an entry of the
// directory it listed last), its listing of a directory on a read-only
// mount (cache.go: the walk moves nothing a stat sees) prepares, for
// each entry listed, the stat Go would give of that path, on the
// thread's Hints: LKL stats the names relative to the open directory,
// once the directory's path is found to lead to that directory (same
// device and inode), with the thread's credentials (the path's walk
// checks search permission on the way, the relative stat on the
// directory). The tier answers a stat or lstat of the same path bytes
// into the same stretch of guest memory as the thread's last stat,
// while the stat cache's generation, the write-backs and the guest's
// memory map stand as they stood, and gives anything else to Go.
//
// Not prepared: "." and "..", a path longer than StatPathMax, one that
// is not a plain image path (a bind, a route, /proc, /dev/fd: each is
// classified as a stat's would be), a name LKL does not stat (its error
// is Go's to give) and a file with a shadow, whose size and times move
// with the guest's native writes (shadowfd.Overlay). A symlink's answer
// is the link's: only a stat that does not follow gets it. Never under
// a policy, an observer, KBOX_DEBUG, a chroot or the debug mirror
// (hintsQuiet).

// StatPathMax bounds the paths a prepared stat holds (the tier's table).
const StatPathMax = 511

// statGoMax is how many of a prepared directory's entries Go may serve at
// sites where the tier gives prepared answers, with none given, before
// the thread prepares no more: the tier cannot give them.
const statGoMax = 4

// StatHash is the hash a tier's table keys a prepared stat's path by:
// FNV-1a, 64 bits, over its bytes (trap/hint_stat.c computes the same).
func StatHash(p []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range p {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// statHintState is a serving thread's record of the walk pattern.
type statHintState struct {
	dir    string // the guest path of the directory it listed last
	prep   string // the directory whose entries it prepared last
	credit int8   // listings that may still prepare stats
	goSeen int    // stats of prep's entries Go served where the tier answers
	left   int    // prep's entries not prepared (Go's to serve)
	off    bool   // the tier gave none of what it was given: no more
	buf    uint64 // the guest buffer of its last stat Go served
}

// sawStat notes a stat Go served successfully of the clean absolute image
// path p into guest buffer out: one of an entry of the directory the
// thread listed last shows the pattern.
func (r *Request) sawStat(p string, out uint64) {
	hs := &r.hint.stat
	hs.buf = out
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return
	}
	parent := p[:max(i, 1)]
	if parent == hs.prep && r.Hints.Ahead() {
		hs.goSeen++
	}
	if parent == hs.dir && !hs.off {
		hs.credit = hintCredit
	}
}

// statAhead prepares, after a listing of directory f (LKL fd lfd, on a
// read-only mount) gave the guest ents, the stats of its entries.
func (e *Engine) statAhead(r *Request, f *fdtable.File, lfd int, ents []byte) {
	hs := &r.hint.stat
	dir := f.Path
	hs.dir = dir
	if hs.off || hs.credit <= 0 || hs.buf == 0 || !guestpath.IsClean(dir) || len(dir) >= StatPathMax || !e.hintsQuiet(r) {
		return
	}
	var t guestpath.Target
	if en := e.classifyRaw(r, dir, 0, &t); en != 0 || !t.Plain() {
		return
	}
	// The clocks before any LKL call: a change made meanwhile leaves
	// what is prepared stale.
	gen, wb := e.stats.Gen(), e.Shadows.WriteBacks()
	sc := getScratch()
	defer putScratch(sc)
	// The path leads to the directory listed (not to one renamed in its
	// place since the open), searchable all the way.
	if lklStatUncached(dir, false, &sc.lst) != 0 {
		return
	}
	dev, ino := sc.lst.Dev, sc.lst.Ino
	if _, le := lkl.Syscall6(lkl.SysFstat, uintptr(lfd), lkl.PtrOf(&sc.lst), 0, 0, 0, 0); le != 0 || sc.lst.Dev != dev || sc.lst.Ino != ino {
		return
	}
	used, ok := r.Hints.StatBegin(dir, gen, wb, hs.buf)
	switch {
	case used:
		hs.credit = hintCredit
	case hs.goSeen >= statGoMax && hs.goSeen > hs.left:
		// Go served more of the last batch's entries than it left
		// unprepared, and the tier gave none.
		hs.off = true
		return
	default:
		hs.credit--
	}
	hs.prep, hs.goSeen, hs.left = dir, 0, 0
	if !ok {
		return
	}
	full := sc.str[:0]
	full = append(full, dir...)
	if dir != "/" {
		full = append(full, '/')
	}
	base := len(full)
	for off := 0; off+19 < len(ents); {
		reclen := int(ents[off+16]) | int(ents[off+17])<<8
		if reclen < 20 || off+reclen > len(ents) {
			return
		}
		rec := ents[off : off+reclen]
		off += reclen
		name := rec[19:]
		if n := indexNUL(name); n >= 0 {
			name = name[:n]
		} else {
			continue
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		hs.left++ // until it is prepared
		if base+len(name) > StatPathMax {
			continue
		}
		full = append(full[:base], name...)
		// (A route, /proc among them, is never plain: classifyRaw is not
		// asked, so that nothing it makes holds the view.)
		view := viewString(full)
		if _, routed := e.route(view); routed {
			continue
		}
		if en := e.classifyRaw(r, view, 0, &t); en != 0 || !t.Plain() {
			continue
		}
		_, le := lkl.Syscall6(lkl.SysNewfstatat, uintptr(lfd), lkl.PtrOf(&rec[19]), lkl.PtrOf(&sc.lst), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		if le != 0 || e.Shadows.OfInode(sc.lst.Dev, sc.lst.Ino) != nil {
			continue
		}
		sc.lst.ToHost(&sc.st)
		if r.Hints.StatAdd(StatHash(full), full, &sc.st, sc.lst.Mode&unix.S_IFMT == unix.S_IFLNK) {
			hs.left--
		}
	}
}

// indexNUL returns the index of b's first NUL, or -1.
func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}
