package dispatch

import (
	"sync"

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

// maxInterned bounds the intern table; it is emptied when full.
const maxInterned = 1024

// interned maps the bytes of recently read guest strings to one immutable
// copy each: a program that stats or opens the same paths again (the
// common case) gets them without allocating. Strings are never shared
// mutably, so handing the same one to several requests is safe.
var interned struct {
	mu sync.Mutex
	m  map[string]string
}

// intern returns b as a string, reusing an earlier copy when there is one.
func intern(b []byte) string {
	if len(b) > 256 {
		return string(b) // long strings are rarely repeated
	}
	interned.mu.Lock()
	defer interned.mu.Unlock()
	if s, ok := interned.m[string(b)]; ok { // no allocation for the lookup
		return s
	}
	if interned.m == nil || len(interned.m) >= maxInterned {
		interned.m = make(map[string]string, 64)
	}
	s := string(b)
	interned.m[s] = s
	return s
}

// isClean reports whether p is already what Clean would return: absolute,
// with no empty, "." or ".." component and no trailing slash.
func isClean(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	if len(p) == 1 {
		return true
	}
	start := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch p[start:i] {
		case "", ".", "..":
			return false
		}
		start = i + 1
	}
	return true
}
