package elfload

import (
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultBrkSize is the address space reserved for a program's break when
// Spec.BrkSize is 0: room for a malloc that grows by brk (musl's and
// glibc's both fall back to mmap when brk fails). It is reserved, not
// committed: pages count only once the break covers them. For an ET_EXEC
// program less is reserved when something is mapped there (load.go,
// reserve), as Linux's break ends at the next mapping.
const DefaultBrkSize = 1 << 30

// Brk is a program's emulated break: a region reserved PROT_NONE right
// after the program's last segment (page-aligned, where Linux puts the
// break before its randomization), of which [Start, page-rounded Current)
// is read-write. Set is brk(2). Safe for concurrent use.
type Brk struct {
	// Start is the initial break, the lowest value it can take; Limit the
	// end of the reservation, the highest.
	Start, Limit uintptr

	mu   sync.Mutex
	cur  uintptr
	pg   uintptr
	dead bool // unmapped: Set changes nothing any more
}

// Current is the break now.
func (b *Brk) Current() uintptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}

// Set is brk(2) as Linux answers it: a new break within [Start, Limit]
// is set (the pages up to it made read-write, the ones above it given
// back: a later growth finds them zeroed) and returned; anything else
// (0, below Start, above Limit, memory the kernel refuses) leaves the
// break as it is and returns it.
func (b *Brk) Set(addr uintptr) uintptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dead || addr < b.Start || addr > b.Limit {
		return b.cur
	}
	oldTop := (b.cur + b.pg - 1) &^ (b.pg - 1)
	newTop := (addr + b.pg - 1) &^ (b.pg - 1)
	switch {
	case newTop > oldTop:
		if mprotect(oldTop, newTop-oldTop, unix.PROT_READ|unix.PROT_WRITE) != nil {
			return b.cur
		}
	case newTop < oldTop:
		// A fresh reservation over the freed pages drops their contents.
		if _, err := mmap(newTop, oldTop-newTop, unix.PROT_NONE, reserveFlags|unix.MAP_FIXED, -1, 0); err != nil {
			return b.cur
		}
	}
	b.cur = addr
	return addr
}

// close stops the break before its reservation is unmapped.
func (b *Brk) close() {
	b.mu.Lock()
	b.dead = true
	b.mu.Unlock()
}
