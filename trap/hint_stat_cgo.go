//go:build linux && amd64 && cgo

package trap

/*
#include "core.h"
*/
import "C"

import (
	"unsafe"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/guestpath"
	"golang.org/x/sys/unix"
)

// Stats prepared ahead (dispatch/hint_stat.go): the thread's table
// (struct kbox_stab, core.h), which hint_stat.c reads on the same thread.
//
// A walk goes depth first: when it lists a directory, the batches of
// directories that are not its ancestors are of subtrees it has left,
// and their entries will not be asked for again; the ancestors' entries
// it has not reached yet will. So the table is a stack of batches: a
// directory's batch takes off the batches above its nearest ancestor's,
// newest first (each bucket's chain starts at its newest entry, so
// taking the newest entries off restores the heads). A directory listed
// in several calls adds to its own batch.

// The table holds what dispatch prepares: the path bound, and struct
// stat whole.
var (
	_ [C.KT_STAB_PATH - 1 - dispatch.StatPathMax]struct{}
	_ [dispatch.StatPathMax - (C.KT_STAB_PATH - 1)]struct{}
	_ [C.KT_STAT_SIZE - unsafe.Sizeof(unix.Stat_t{})]struct{}
	_ [unsafe.Sizeof(unix.Stat_t{}) - C.KT_STAT_SIZE]struct{}
	_ [C.KT_STATX_SIZE - len(dispatch.StatAnswers{}.Stx)]struct{}
	_ [len(dispatch.StatAnswers{}.Stx) - C.KT_STATX_SIZE]struct{}
	_ [len(C.struct_kbox_stab_x{}.ans) - len(dispatch.StatAnswers{}.Xattr)]struct{}
	_ [len(dispatch.StatAnswers{}.Xattr) - len(C.struct_kbox_stab_x{}.ans)]struct{}
)

// statBatch is one directory's entries in the table: from entry n and
// name byte names on.
type statBatch struct {
	dir      string
	n, names uint32
}

// statClock gives hint_stat.c the guest memory map's removal count.
func (t *tier) statClock() {
	clockPins.Pin(&t.mem.rm)
	C.kbox_stat_clock((*C.uint64_t)(unsafe.Pointer(&t.mem.rm)))
}

// StatBegin is dispatch.Hints's: the table holds answers for the clocks
// gen and wb, into the stretch of guest memory around a stat at buf,
// and dir's batch is on top.
func (th *thread) StatBegin(dir string, gen, wb, buf uint64, sx dispatch.StatxKind) (used, ok bool) {
	x := th.c.xhint
	if x == nil {
		return false, false
	}
	s := x.stab
	if s == nil {
		if s = C.kbox_stab_alloc(x); s == nil {
			return false, false
		}
	}
	used = s.on != 0 && s.used != 0
	s.used = 0
	sp, rm, found := tr.mem.watch(buf, buf+C.KT_STAT_SIZE)
	if !found || !inUser(buf, C.KT_STAT_SIZE) {
		s.on = 0
		return used, false
	}
	flags, mask := sx.Flags&^unix.AT_SYMLINK_NOFOLLOW, sx.Mask
	if !sx.On {
		flags, mask = ^uint32(0), 0 // no statx answered
	}
	if s.on == 0 || uint64(s.gen) != gen || uint64(s.wb) != wb || uint32(s.stx_flags) != flags || uint32(s.stx_mask) != mask {
		th.statEmpty(s)
		s.stx_flags, s.stx_mask = C.uint32_t(flags), C.uint32_t(mask)
	}
	for len(th.batches) > 0 {
		top := &th.batches[len(th.batches)-1]
		if top.dir == "/" || guestpath.Under(dir, top.dir) { // an ancestor, or itself
			break
		}
		th.statPop(s, len(th.batches)-1)
	}
	if len(th.batches) == 0 || th.batches[len(th.batches)-1].dir != dir {
		th.batches = append(th.batches, statBatch{dir, uint32(s.n), uint32(s.names_used)})
	}
	s.gen, s.wb, s.rm = C.uint64_t(gen), C.uint64_t(wb), C.uint64_t(rm)
	s.buf_lo, s.buf_hi = C.uint64_t(sp.lo), C.uint64_t(sp.hi)
	s.on = 1
	return used, true
}

// statEmpty empties the table.
func (th *thread) statEmpty(s *C.struct_kbox_stab) {
	s.n, s.names_used = 0, 0
	clear(s.head[:])
	th.batches = th.batches[:0]
}

// statPop takes the batches from the i-th on off the table.
func (th *thread) statPop(s *C.struct_kbox_stab, i int) {
	b := th.batches[i]
	for k := uint32(s.n); k > b.n; k-- {
		e := &s.ent[k-1]
		s.head[uint64(e.hash)&(C.KT_STAB_BUCKETS-1)] = e.next
	}
	s.n, s.names_used = C.uint32_t(b.n), C.uint32_t(b.names)
	th.batches = th.batches[:i]
}

// StatAdd is dispatch.Hints's: after StatBegin's ok. A full table takes
// no more.
func (th *thread) StatAdd(hash uint64, path []byte, a *dispatch.StatAnswers) bool {
	s := th.c.xhint.stab
	if s == nil || s.on == 0 || len(path) >= C.KT_STAB_PATH || s.n >= C.KT_STAB_ENTS || int(s.names_used)+len(path) > C.KT_STAB_NAMES {
		return false
	}
	i := s.n
	e := &s.ent[i]
	e.hash, e.off, e.len = C.uint64_t(hash), s.names_used, C.uint16_t(len(path))
	e.has = 0
	if a.HasSt {
		e.has |= C.KT_HAS_ST
		*(*unix.Stat_t)(unsafe.Pointer(&e.st[0])) = a.St
	}
	if a.HasStx {
		x := &s.xent[i]
		e.has |= C.KT_HAS_STX
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&x.stx[0])), C.KT_STATX_SIZE), a.Stx[:])
		if a.HasXattr {
			e.has |= C.KT_HAS_XATTR
			for n := range a.Xattr {
				for f := range a.Xattr[n] {
					x.ans[n][f] = C.int32_t(-int32(a.Xattr[n][f]))
				}
			}
		}
	}
	if a.Lnk {
		e.has |= C.KT_LNK
	}
	names := unsafe.Slice((*byte)(unsafe.Pointer(&s.names[0])), C.KT_STAB_NAMES)
	copy(names[s.names_used:], path)
	b := hash & (C.KT_STAB_BUCKETS - 1)
	e.next = s.head[b]
	s.head[b] = C.int32_t(i + 1)
	s.n++
	s.names_used += C.uint32_t(len(path))
	return true
}
