package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Per-call scratch memory, so that the hot paths (stat, open, access of an
// image path) do not allocate: buffers come from a pool, and the strings
// read from guest memory are interned.

// scratch holds the buffers one handler needs at a time.
type scratch struct {
	str [PathMax]byte     // a string being read from the guest
	c   [PathMax + 1]byte // a NUL-terminated path for LKL
	st  unix.Stat_t       // a stat result on its way to the guest
	lst lkl.Stat64        // LKL's stat result
	si  unix.Sysinfo_t    // LKL's sysinfo
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch  { return scratchPool.Get().(*scratch) }
func putScratch(s *scratch) { scratchPool.Put(s) }

// cstring returns p NUL-terminated, in s.c when it fits.
func (s *scratch) cstring(p string) []byte {
	if len(p) >= len(s.c) {
		return cpath(p)
	}
	n := copy(s.c[:], p)
	s.c[n] = 0
	return s.c[:n+1]
}

// internSlots is the size of the intern table.
const internSlots = 4096

// interned holds one immutable copy each of recently read guest strings:
// a program that stats or opens the same paths again (the common case)
// gets them without allocating. It is a direct-mapped table of atomic
// pointers, so lookups take no lock from any thread; two strings that hash
// to one slot replace each other (a miss costs one allocation, as it would
// without the table). Strings are immutable, so handing the same one to
// several requests is safe.
var interned [internSlots]atomic.Pointer[string]

// intern returns b as a string, reusing an earlier copy when there is one.
func intern(b []byte) string {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	slot := &interned[h%internSlots]
	if p := slot.Load(); p != nil && *p == string(b) { // no allocation for the comparison
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}
