package dispatch

import (
	"bytes"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// PathMax bounds strings read from the guest.
const PathMax = 4096

// readString reads a NUL-terminated string of at most limit bytes from guest
// memory. Bad pointers give EFAULT; over-long strings ENAMETOOLONG.
func readString(g Guest, addr uint64, limit int) (string, unix.Errno) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	sc := getScratch()
	defer putScratch(sc)
	n, found, en := stringLen(g, addr, min(limit, len(sc.str)), sc.str[:], true)
	switch {
	case en != 0:
		return "", en
	case !found:
		return "", unix.ENAMETOOLONG
	}
	return intern(sc.str[:n]), 0
}

// stringLen finds the NUL of the guest string at addr within limit bytes,
// reading page by page so that a string ending just before unmapped memory
// still reads. With keep the bytes land in buf (limit <= len(buf));
// without, buf is a window of at least a page, reused for every read.
// found is false when no NUL came within limit; EFAULT when memory ends
// first. The first read is at most firstChunk bytes: most paths are
// short, and a page's copy costs more than the call that makes it.
func stringLen(g Guest, addr uint64, limit int, buf []byte, keep bool) (n int, found bool, en unix.Errno) {
	for got := 0; got < limit; {
		chunk := min(4096-int((addr+uint64(got))%4096), limit-got)
		if got == 0 {
			chunk = min(chunk, firstChunk)
		}
		w := buf[:chunk]
		if keep {
			w = buf[got : got+chunk]
		}
		k, err := g.ReadSome(addr+uint64(got), w)
		k = max(0, min(k, chunk)) // whatever the tier returns with its error
		if i := bytes.IndexByte(w[:k], 0); i >= 0 {
			return got + i, true, 0
		}
		got += k
		if err != nil || k < chunk {
			return 0, false, unix.EFAULT
		}
	}
	return limit, false, 0
}

// firstChunk is how much of a guest string stringLen reads first.
const firstChunk = 256

// readPath reads a path argument and checks the request is still valid.
// The first path read is kept in r.Path for the observatory.
func readPath(r *Request, addr uint64) (string, unix.Errno) {
	s, en := readString(r.G, addr, PathMax)
	if en != 0 {
		return "", en
	}
	if r.G.Valid() != nil {
		return "", unix.ENOENT
	}
	if r.Path == "" {
		r.Path = s
	}
	return s, 0
}

// checkStrings checks an execve argv or envp array as the kernel will read
// it: every pointer readable and every string NUL-terminated within
// maxArgStrlen. execve rewrites the guest's path string before the host
// kernel runs it, and that rewrite outlives an exec the kernel then fails,
// so what would fail must fail first. A NULL array is valid.
func checkStrings(g Guest, addr uint64) unix.Errno {
	if addr == 0 {
		return 0
	}
	sc := getScratch()
	defer putScratch(sc)
	var ptrs [64]uint64
	for i := 0; i < maxArgStrings; i += len(ptrs) {
		raw := asBytes(&ptrs)
		n, _ := g.ReadSome(addr+uint64(i*8), raw)
		if n < 8 {
			return unix.EFAULT
		}
		for _, p := range ptrs[:n/8] {
			if p == 0 {
				return 0
			}
			if en := checkString(g, p, sc.str[:]); en != 0 {
				return en
			}
		}
		if n < len(raw) {
			return unix.EFAULT // the array runs into unmapped memory
		}
	}
	return 0 // longer arrays are the kernel's to judge
}

// maxArgStrlen is the kernel's MAX_ARG_STRLEN; maxArgStrings bounds how
// many strings checkStrings looks at.
const (
	maxArgStrlen  = 32 * 4096
	maxArgStrings = 1 << 16
)

// checkString checks that the string at addr ends within maxArgStrlen,
// reading through buf (a page or more).
func checkString(g Guest, addr uint64, buf []byte) unix.Errno {
	_, found, en := stringLen(g, addr, maxArgStrlen, buf, false)
	switch {
	case en != 0:
		return en
	case !found:
		return unix.E2BIG
	}
	return 0
}

// Per-call scratch memory, so that the hot paths (stat, open, access of an
// image path) do not allocate: buffers come from a pool, and the strings
// read from guest memory are interned.

// scratch holds the buffers one handler needs at a time.
type scratch struct {
	str [PathMax]byte         // a string being read from the guest
	c   [PathMax + 1]byte     // a NUL-terminated path for LKL
	st  unix.Stat_t           // a stat result on its way to the guest
	lst lkl.Stat64            // LKL's stat result
	si  unix.Sysinfo_t        // LKL's sysinfo
	sf  unix.Statfs_t         // LKL's statfs
	sx  [lkl.SizeofStatx]byte // a statx result, LKL's or the host's
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
// without the table). Each slot points at one allocation holding a
// string's length and then its bytes (internNew, unsafe.go), so a look
// reads one object and a miss makes one, with no pointers for the
// collector to scan; and it keeps the string's hash, so that a miss (ls
// -lR's every new path) reads no object, which is seldom in the CPU's
// caches. Strings are immutable, so handing the same one to several
// requests is safe.
var interned [internSlots]internSlot

type internSlot struct {
	hash atomic.Uint64 // of the string p holds, or of one being stored
	p    atomic.Pointer[byte]
}

// internSeed seeds intern's hash (the runtime's: AES where the CPU has it).
var internSeed = maphash.MakeSeed()

// intern returns b as a string, reusing an earlier copy when there is one.
// A slot's hash and pointer are stored apart: a look that reads a hash
// and another string's pointer compares the bytes, finds them unequal and
// makes a copy, as for any miss.
func intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := maphash.Bytes(internSeed, b)
	slot := &interned[uint32(h^h>>32)%internSlots]
	if slot.hash.Load() == h {
		if p := slot.p.Load(); p != nil {
			if s := internedString(p); s == string(b) { // no allocation for the comparison
				return s
			}
		}
	}
	p, s := internNew(b)
	slot.p.Store(p)
	slot.hash.Store(h)
	return s
}
