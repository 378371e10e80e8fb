package dispatch

import (
	"sync/atomic"

	"github.com/kbox-project/kbox/gdbmirror"
	"github.com/kbox-project/kbox/guestpath"
	"golang.org/x/sys/unix"
)

// Answers prepared ahead, which an in-process tier gives without coming
// into Go (trap/hint.c).
//
// ls -l asks of each file statx, then lgetxattr security.selinux and
// getxattr system.posix_acl_access (and of a directory
// system.posix_acl_default) of the same path string. The gets
// nearly always fail (ENODATA) and are answered from facts
// (xattr_facts.go), but each still pays the way into Go and back. Once a
// thread has shown the pattern (a get answered from facts of the path its
// last statx named), its statx of a plain image path prepares those
// answers, for both forms (follow and not), on the thread's Hints: the
// tier then answers a get of the same name and the same path bytes while
// the stat cache's generation and the shadows' write-backs stand where
// they stood before the statx, and gives anything else to Go.
//
// Such an answer is the one Go would give. The facts hold within a run of
// pure calls (the generation, cache.go) and the write-backs' count, which
// the tier compares at the call; the path string resolves as it did (the
// resolution memo's rule, resolve.go: lexical, with the cwd, which only a
// chdir changes, and that moves the generation), and the credentials
// change only by calls that move the generation too. Nothing is prepared
// under a policy, an observer (the observatory, a trace, an agent's
// counts), KBOX_DEBUG, a chroot or the debug mirror: they must see every
// call. A name, pointer or path that differs, or guest memory that
// faults, takes the ordinary way.

// Hints is a serving thread's place for answers prepared ahead; nil in
// a tier that has none.
type Hints interface {
	// ArmXattr replaces the thread's prepared answers with h's (nil:
	// none); used reports whether the ones it replaced answered a call.
	ArmXattr(h *XattrHint) (used bool)
	// Ahead reports whether the call being served came in where the
	// tier gives prepared answers (the rewrite tier: a patched site).
	Ahead() bool
	// StatBegin starts directory dir's batch of prepared stats
	// (hint_stat.go) that hold while the clocks stand at gen and wb,
	// answering into the stretch of guest memory that holds buf; of the
	// batches before it, it may keep those of dir's ancestors that hold
	// for the same clocks and statx kind sx (the flags and mask its
	// statx answers are for), and dir's own. used reports whether prepared
	// answers answered a call since the last StatBegin; ok false: the tier
	// takes none now.
	StatBegin(dir string, gen, wb, buf uint64, sx StatxKind) (used, ok bool)
	// StatAdd prepares a's answers for path (hash its StatHash). false:
	// the tier has no room for it.
	StatAdd(hash uint64, path []byte, a *StatAnswers) bool
}

// XattrHint holds the answers to the gets ls -l makes of a path.
type XattrHint struct {
	Gen, WB uint64 // the clocks (HintClocks) before the statx
	Path    string // the guest's path string, as the statx read it
	// Ans is by name (HintNames) and form (0 getxattr, 1 lgetxattr); 0
	// where Go must answer.
	Ans [len(HintNames)][2]unix.Errno
}

// HintNames are the names a hint answers, in Ans's order: what ls -l
// asks (the default ACL of a directory only).
var HintNames = [3]string{"security.selinux", "system.posix_acl_access", "system.posix_acl_default"}

// HintPathMax bounds the paths a hint holds (the tier's buffer).
const HintPathMax = 255

// hintCredit is how many statx calls in a row prepare answers (asking
// LKL for the file's names, if no one has) that no call then uses before
// a thread stops preparing them.
const hintCredit = 8

// hintState is a serving thread's record of the pattern (its Request's).
type hintState struct {
	last   string // the LKL path of its last statx
	credit int8   // statx calls that may still prepare answers
	armed  bool   // the last statx prepared answers
	// off: Go served a get the thread had a prepared answer for (at a
	// site the tier does not answer at, or after another thread's
	// change): the thread prepares no more.
	off bool
	h   XattrHint
	// known holds learned answers (xattr_facts.go) by file system and
	// type, so that a statx looks them up once per kind of file.
	known [4]hintKnown
	next  uint8
	stat  statHintState // hint_stat.go
}

type hintKnown struct {
	set        bool
	epoch, dev uint64
	ifmt       uint32
	ans        [len(HintNames)]unix.Errno
}

// HintClocks returns the counters a tier compares before it gives a
// prepared answer: the stat cache's generation and the shadows'
// write-backs. They live as long as the engine.
func (e *Engine) HintClocks() (gen, wb *atomic.Uint64) {
	return e.stats.GenCounter(), e.Shadows.WriteBackCounter()
}

// hintsQuiet reports whether calls may be answered outside the engine:
// nothing watches or rules them.
func (e *Engine) hintsQuiet(r *Request) bool {
	return e.Observe == nil && !e.Debug && e.Opt.Policy == nil && !gdbmirror.On() && r.P != nil && r.P.chroot() == ""
}

// sawXattrGet notes a get of a facts name of LKL path path that Go
// served (done: from facts). A get of the path of the thread's last
// statx answered from facts shows the pattern; one whose answer the
// thread had prepared, at a site the tier answers at, shows that the
// tier does not give them.
func (r *Request) sawXattrGet(path, name string, nofollow, done bool) {
	hs := &r.hint
	i := hintIndex(name)
	if r.Hints == nil || path != hs.last || i < 0 {
		return
	}
	form := 0
	if nofollow {
		form = 1
	}
	if hs.armed && hs.h.Ans[i][form] != 0 {
		if r.Hints.Ahead() {
			hs.off = true
		}
		return
	}
	hs.known = [len(hs.known)]hintKnown{} // LKL may have taught more
	if done {
		hs.credit = hintCredit
	}
}

func hintIndex(name string) int {
	for i, n := range HintNames {
		if n == name {
			return i
		}
	}
	return -1
}

// armXattrHint prepares, after a successful statx of guest path p (dirfd
// AT_FDCWD or p absolute; nofollow its AT_SYMLINK_NOFOLLOW) that resolved
// to target t, the answers to the gets ls -l makes next. cred, wb and gen
// are the statx's fact key, read before its call.
func (e *Engine) armXattrHint(r *Request, p string, t *guestpath.Target, nofollow bool, cred, wb, gen uint64) {
	hs := &r.hint
	hs.last = t.LKLPath()
	if hs.armed && r.Hints.ArmXattr(nil) {
		hs.credit = hintCredit // they were used: go on
	}
	hs.armed = false
	if hs.off || hs.credit <= 0 || len(p) > HintPathMax || !t.Plain() || guestpath.UnderPts(t.Path) || !e.hintsQuiet(r) {
		return
	}
	hs.credit-- // each preparation spends one, the use of one gives them back
	epoch := e.xfacts.mountEpoch.Load()
	f, ok := e.xattrNoNames(cred, wb, gen, hs.last, nofollow)
	if !ok {
		return
	}
	h := &hs.h
	*h = XattrHint{Gen: gen, WB: wb, Path: p}
	if hs.answers(e, epoch, f, nofollow, &h.Ans) {
		r.Hints.ArmXattr(h)
		hs.armed = true
	}
}

// answers fills ans with the gets' answers for fact f's file without
// names (a statx's, nofollow its AT_SYMLINK_NOFOLLOW), by name and form;
// false when there is none.
func (hs *hintState) answers(e *Engine, epoch uint64, f xattrFact, nofollow bool, ans *[len(HintNames)][2]unix.Errno) bool {
	any := false
	for i, en := range hs.learned(e, epoch, f.dev, f.mode&unix.S_IFMT) {
		if en == 0 {
			continue
		}
		// The link form's fact is the path form's too for what is no
		// symlink (xattrFact); a followed statx tells nothing of the
		// link.
		if nofollow {
			ans[i][1] = en
		}
		if !nofollow || f.mode&unix.S_IFMT != unix.S_IFLNK {
			ans[i][0] = en
		}
		any = true
	}
	return any
}

// learned returns the learned answers for the names to a file without
// names of type ifmt on dev, in mount epoch epoch.
func (hs *hintState) learned(e *Engine, epoch, dev uint64, ifmt uint32) [len(HintNames)]unix.Errno {
	for i := range hs.known {
		if k := &hs.known[i]; k.set && k.epoch == epoch && k.dev == dev && k.ifmt == ifmt {
			return k.ans
		}
	}
	k := &hs.known[int(hs.next)%len(hs.known)]
	hs.next++
	*k = hintKnown{set: true, epoch: epoch, dev: dev, ifmt: ifmt}
	for i, name := range HintNames {
		if en, ok := e.xfacts.answer(xattrLearnKey{epoch, dev, ifmt, name}); ok {
			k.ans[i] = en
		}
	}
	return k.ans
}
