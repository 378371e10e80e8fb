//go:build linux

package trap

import (
	"sort"
	"sync"
	"sync/atomic"
)

// regions is the set of address ranges that are the guest's: what the
// loader mapped (segments, stack, the brk reservation) and every mapping
// the guest made since. The memory guard lets the guest unmap, remap,
// protect, advise and map MAP_FIXED only inside it, and kbox writes guest
// memory on the guest's behalf only inside it: kbox's, Go's and LKL's
// memory is never the guest's to change through a syscall.
//
// Every syscall that touches guest memory asks contains, so it takes no
// lock: add and remove (under mu) publish a new slice, never change one.
type regions struct {
	mu sync.Mutex
	rs atomic.Pointer[[]span] // sorted, disjoint, not adjacent
	// rm counts removals (and removals about to be made: removing)
	// that touch a watched stretch: a stretch watch gave is all the
	// guest's while rm stands still (hint_stat.c). Past watchMax
	// stretches apart, every removal counts.
	rm      atomic.Uint64
	watched []span
	all     bool
}

// watchMax bounds the stretches watched apart.
const watchMax = 8

// spans is the current set (nil: empty).
func (r *regions) spans() []span {
	if p := r.rs.Load(); p != nil {
		return *p
	}
	return nil
}

// span is [lo, hi).
type span struct{ lo, hi uint64 }

const pageSize = 4096

func pageDown(a uint64) uint64 { return a &^ (pageSize - 1) }

// pageUp rounds up to a page, or returns 0 when that overflows.
func pageUp(a uint64) uint64 {
	if a > ^uint64(0)-(pageSize-1) {
		return 0
	}
	return (a + pageSize - 1) &^ (pageSize - 1)
}

// add makes [lo, hi) the guest's.
func (r *regions) add(lo, hi uint64) {
	if hi <= lo {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.spans()
	out := make([]span, 0, len(cur)+1)
	n := span{lo, hi}
	placed := false
	for _, s := range cur {
		switch {
		case s.hi < n.lo:
			out = append(out, s)
		case n.hi < s.lo:
			if !placed {
				out = append(out, n)
				placed = true
			}
			out = append(out, s)
		default: // overlapping or adjacent: merge into n
			n.lo, n.hi = min(n.lo, s.lo), max(n.hi, s.hi)
		}
	}
	if !placed {
		out = append(out, n)
	}
	r.rs.Store(&out)
}

// remove takes [lo, hi) out of the set.
func (r *regions) remove(lo, hi uint64) {
	if hi <= lo {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.touch(lo, hi)
	cur := r.spans()
	out := make([]span, 0, len(cur)+1)
	for _, s := range cur {
		if s.hi <= lo || hi <= s.lo {
			out = append(out, s)
			continue
		}
		if s.lo < lo {
			out = append(out, span{s.lo, lo})
		}
		if hi < s.hi {
			out = append(out, span{hi, s.hi})
		}
	}
	r.rs.Store(&out)
}

// contains reports whether all of [lo, hi) is the guest's. An empty range
// is contained when lo is.
func (r *regions) contains(lo, hi uint64) bool {
	if hi < lo {
		return false
	}
	rs := r.spans()
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi > lo })
	if i == len(rs) || rs[i].lo > lo {
		return false
	}
	return hi <= rs[i].hi
}

// removing notes that [lo, hi) may stop being the guest's (a munmap or
// mremap about to run): remove follows.
func (r *regions) removing(lo, hi uint64) {
	r.mu.Lock()
	r.touch(lo, hi)
	r.mu.Unlock()
}

// touch moves rm if [lo, hi) meets a watched stretch; r.mu is held.
func (r *regions) touch(lo, hi uint64) {
	if r.all {
		r.rm.Add(1)
		return
	}
	for _, w := range r.watched {
		if lo < w.hi && w.lo < hi {
			r.rm.Add(1)
			return
		}
	}
}

// watchAround is how far on either side of the range asked for watch
// watches: a walk's stat buffers are in its stack frames, near each
// other, and mappings next to them (which the set merges into one span)
// come and go.
const watchAround = 64 << 10

// watch returns the stretch of the guest's memory, up to watchAround on
// either side of [lo, hi) (which must be the guest's), watched from now
// on, and rm as it stands.
func (r *regions) watch(lo, hi uint64) (span, uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.spans()
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi > lo })
	if hi < lo || i == len(rs) || rs[i].lo > lo || hi > rs[i].hi {
		return span{}, 0, false
	}
	s := rs[i] // page-aligned, so s.lo <= pageDown(lo) and pageUp(hi) <= s.hi
	if a := pageDown(lo); a-s.lo > watchAround {
		s.lo = a - watchAround
	}
	if b := pageUp(hi); b != 0 && s.hi-b > watchAround {
		s.hi = b + watchAround
	}
	// A stretch that meets a watched one joins it (watching more is
	// safe); a walk's stretches, all in its stack, are one.
	joined := false
	for k, w := range r.watched {
		if s.lo <= w.hi && w.lo <= s.hi {
			r.watched[k] = span{min(w.lo, s.lo), max(w.hi, s.hi)}
			joined = true
			break
		}
	}
	switch {
	case joined:
	case len(r.watched) < watchMax:
		r.watched = append(r.watched, s)
	default:
		r.all = true
	}
	return s, r.rm.Load(), true
}

// list returns a copy of the set.
func (r *regions) list() []span { return append([]span(nil), r.spans()...) }
