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
}

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

// list returns a copy of the set.
func (r *regions) list() []span { return append([]span(nil), r.spans()...) }
