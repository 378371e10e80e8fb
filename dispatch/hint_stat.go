package dispatch

import (
	"encoding/binary"
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
// directory). A thread that statxes the entries (ls -l) gets its statx
// of the same flags and mask prepared too, and after it ls -l's gets'
// answers (hint.go). The tier answers a stat, lstat or statx of the same
// path bytes into the same stretch of guest memory as the thread's last
// stat, while the stat cache's generation, the write-backs and the
// guest's memory map stand as they stood, and gives anything else to
// Go.
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

// StatxKind is the statx a thread asks of a walk's entries: its flags
// and mask (On: it asks one).
type StatxKind struct {
	On          bool
	Flags, Mask uint32
}

// StatAnswers are the answers prepared for a path: its stat, its statx
// (of the batch's StatxKind, the link's: AT_SYMLINK_NOFOLLOW added) and,
// after the statx, ls -l's gets (hint.go's, by name and form; 0 where Go
// must answer). Lnk: a symlink, answered only to a stat or statx that
// does not follow.
type StatAnswers struct {
	HasSt, HasStx, HasXattr bool
	Lnk                     bool
	St                      unix.Stat_t
	Stx                     [lkl.SizeofStatx]byte
	Xattr                   [len(HintNames)][2]unix.Errno
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
	// stat, stx: the thread stats, statxes the entries (stx's kind)
	stat bool
	stx  StatxKind
	ans  StatAnswers // an entry's, being prepared
}

// sawStat notes a stat (sx nil) or statx (sx its kind) Go served
// successfully of the clean absolute image path p into guest buffer out:
// one of an entry of the directory the thread listed last shows the
// pattern.
func (r *Request) sawStat(p string, out uint64, sx *StatxKind) {
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
		if sx == nil {
			hs.stat = true
		} else {
			hs.stx = *sx
		}
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
	cred, _, _ := e.factKey(r)
	epoch := e.xfacts.mountEpoch.Load()
	used, ok := r.Hints.StatBegin(dir, gen, wb, hs.buf, hs.stx)
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
	for off := 0; ; {
		name, reclen, ok := direntAt(ents, off)
		if !ok {
			return
		}
		rec := ents[off : off+reclen]
		off += reclen
		if len(name) == 0 || 19+len(name) >= reclen || string(name) == "." || string(name) == ".." {
			continue // (LKL is given the name in place: its NUL must be there)
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
		if e.prepare(r, sc, lfd, &rec[19], full, cred, wb, gen, epoch) && r.Hints.StatAdd(StatHash(full), full, &hs.ans) {
			hs.left--
		}
	}
}

// prepare fills the thread's StatAnswers for the entry name (NUL
// terminated, in the listing's buffer) of LKL directory lfd, guest path
// full: LKL's lstat, its statx of the thread's kind, and the gets' answers
// after it; false when there is nothing to give (an error is Go's to
// give; a file with a shadow changes with the guest's native writes).
// sc's lst and sx are its (str holds full).
func (e *Engine) prepare(r *Request, sc *scratch, lfd int, name *byte, full []byte, cred, wb, gen, epoch uint64) bool {
	hs := &r.hint.stat
	a := &hs.ans
	a.HasSt, a.HasStx, a.HasXattr = false, false, false
	if hs.stat {
		if _, le := lkl.Syscall6(lkl.SysNewfstatat, uintptr(lfd), lkl.PtrOf(name), lkl.PtrOf(&sc.lst), unix.AT_SYMLINK_NOFOLLOW, 0, 0); le != 0 {
			return false
		}
		if e.Shadows.OfInode(sc.lst.Dev, sc.lst.Ino) != nil {
			return false
		}
		sc.lst.ToHost(&a.St)
		a.HasSt, a.Lnk = true, sc.lst.Mode&unix.S_IFMT == unix.S_IFLNK
	}
	if hs.stx.On {
		flags := uintptr(hs.stx.Flags | unix.AT_SYMLINK_NOFOLLOW)
		if _, le := lkl.Syscall6(lkl.SysStatx, uintptr(lfd), lkl.PtrOf(name), flags, uintptr(hs.stx.Mask), lkl.PtrOf(&sc.sx), 0); le != 0 {
			return a.HasSt
		}
		mode := binary.NativeEndian.Uint16(sc.sx[28:])
		dev := unix.Mkdev(binary.NativeEndian.Uint32(sc.sx[statxDevOff:]), binary.NativeEndian.Uint32(sc.sx[statxDevOff+4:]))
		if e.Shadows.OfInode(dev, binary.NativeEndian.Uint64(sc.sx[statxInoOff:])) != nil {
			return false
		}
		a.Stx, a.HasStx, a.Lnk = sc.sx, true, uint32(mode)&unix.S_IFMT == unix.S_IFLNK
		// ls -l's gets after it, as the statx's own (hint.go): the
		// fact noted under the path's interned string, the names
		// asked of LKL.
		path := intern(full)
		e.noteStatx(cred, wb, gen, path, true, sc.sx[:])
		if f, ok := e.xattrNoNames(cred, wb, gen, path, true); ok && !guestpath.UnderPts(path) {
			a.Xattr = [len(HintNames)][2]unix.Errno{}
			a.HasXattr = r.hint.answers(e, epoch, f, true, &a.Xattr)
		}
	}
	return a.HasSt || a.HasStx
}
