package rewrite

import (
	"encoding/binary"
	"errors"
	"sync"
)

// The slot table: 8-byte pointers at X86SlotBase, one per patched site,
// each the address of the site's stub. A patched site is
// `jmp *disp32` = FF 24 25 b0 b1 b2 b3 with disp32 the slot's address.
// The slot's address is chosen so that b2, at site+5 where the `syscall`
// was, is 06 (an invalid opcode in 64-bit mode: #UD, SIGILL): a thread
// that had executed the old mov and resumes at site+5 faults there, and
// kbox serves that fault as the syscall it was about to make
// (docs/tiers.md, Rewrite tier). b3 = 7F keeps disp32 positive (it is
// sign-extended) and the table in the low 2 GB, away from a non-PIE
// program (from 4 MiB), its break, and LKL's memory (at 1 GiB).
const (
	X86SlotBase  = 0x7F060000
	X86SlotBytes = 64 << 10 // b1:b0 span 64 KiB
	X86Slots     = X86SlotBytes / 8
	X86StubSize  = 64 // room for an extended site's moves (x86moves.go)
	// X86StubBytes is the stub area: one stub per slot.
	X86StubBytes = X86Slots * X86StubSize
)

// X86Jump is the 7 bytes of a patched site jumping through slot.
func X86Jump(slot uint32) [X86SiteLen]byte {
	var b [X86SiteLen]byte
	b[0], b[1], b[2] = 0xFF, 0x24, 0x25
	binary.LittleEndian.PutUint32(b[3:], slot)
	return b
}

// X86SlotAddr is the address of slot i.
func X86SlotAddr(i int) uint32 { return uint32(X86SlotBase + 8*i) }

// jmpAbs is `jmp *0(%rip)` followed by the 8-byte target.
func jmpAbs(b []byte, target uint64) []byte {
	b = append(b, 0xFF, 0x25, 0, 0, 0, 0)
	return binary.LittleEndian.AppendUint64(b, target)
}

// X86StubCall is a site's stub into kbox: `mov $nr,%eax`,
// `movabs $ret,%rcx` (as the kernel's syscall leaves the return address
// in %rcx), `jmp *entry` (kbox's entry, which saves the rest: trap/core.c).
func X86StubCall(nr uint32, ret, entry uint64) []byte {
	b := []byte{0xB8}
	b = binary.LittleEndian.AppendUint32(b, nr)
	b = append(b, 0x48, 0xB9)
	b = binary.LittleEndian.AppendUint64(b, ret)
	return jmpAbs(b, entry)
}

// X86StubConst answers the syscall inline: `mov $val,%eax`, back to ret
// (getpid, getppid: values constant for the run).
func X86StubConst(val uint32, ret uint64) []byte {
	b := []byte{0xB8}
	b = binary.LittleEndian.AppendUint32(b, val)
	return jmpAbs(b, ret)
}

// X86StubGS32 answers the syscall inline from the thread's own state:
// `mov %gs:off,%eax`, back to ret (gettid: the thread's tid in its
// kbox_thread, which %gs points to on a guest thread).
func X86StubGS32(off uint32, ret uint64) []byte {
	b := []byte{0x65, 0x8B, 0x04, 0x25}
	b = binary.LittleEndian.AppendUint32(b, off)
	return jmpAbs(b, ret)
}

// X86Mem is the patcher's access to guest code and to the slot table.
type X86Mem interface {
	// Code returns the writable view of the code at addr (through its
	// text alias), at least n bytes, or nil.
	Code(addr uint64, n int) []byte
	// Store1 and Store2 store one byte, or two bytes as one store, into a
	// view Code returned.
	Store1(b []byte, i int, v byte)
	Store2(b []byte, i int, v [2]byte)
	// Sync makes every thread of the process serialise its instruction
	// stream before it runs guest code again (membarrier SYNC_CORE).
	Sync()
	// SetSlot writes slot i's pointer; SetStub writes stub i and returns
	// its address.
	SetSlot(i int, ptr uint64)
	SetStub(i int, code []byte) uint64
}

// X86Patch is one patched site.
type X86Patch struct {
	Site  uint64
	Nr    uint32
	Slot  int
	Kind  StubKind
	Len   int       // mov through syscall: X86SiteLen, more with moves
	Moves []X86Move // an extended site's moves (x86moves.go)
	// Dynamic: the number is in %rax (x86dyn.go); Nr is the first one
	// the site trapped with.
	Dynamic bool
	orig    [X86SiteLen]byte
}

// StubKind is what a site's stub does.
type StubKind int

const (
	StubCall  StubKind = iota // into kbox's dispatch entry
	StubConst                 // a constant answer (getpid, getppid)
	StubGS                    // the thread's tid (gettid)
)

// X86Patcher patches sites and keeps them: the slot table's bookkeeping,
// the patch and unpatch protocol.
type X86Patcher struct {
	Mem X86Mem
	mu  sync.Mutex
	// sites by address; touched holds every site whose bytes were
	// changed (an int3 was at its mov for a while).
	sites   map[uint64]*X86Patch
	slots   map[int]*X86Patch // the live patches by slot
	touched map[uint64]bool
	next    int
}

var (
	ErrSlotsFull = errors.New("the slot table is full")
	ErrNoAlias   = errors.New("the code has no writable alias")
	ErrPatched   = errors.New("the site is patched already")
)

func (p *X86Patcher) init() {
	if p.sites == nil {
		p.sites = map[uint64]*X86Patch{}
		p.slots = map[int]*X86Patch{}
		p.touched = map[uint64]bool{}
	}
}

// Patch replaces the site's 7 bytes by a jump to a new stub (code).
// Protocol (docs/tiers.md): int3 at the mov; Sync; the middle bytes
// (site+5..6 as one store: old 0F 05 or new 06 7F, both safe for a thread
// resuming at site+5); Sync; FF at the mov; Sync. A thread reaching the
// site meanwhile takes SIGTRAP at site+1 and is sent back to the site
// (Restart) until the patch is whole.
func (p *X86Patcher) Patch(site uint64, nr uint32, kind StubKind, stub func(slot int) []byte) (*X86Patch, error) {
	return p.PatchSite(X86SiteInfo{Site: site, Len: X86SiteLen}, nr, kind, stub)
}

// PatchSite is Patch for a site X86FindSite gave, which may have moves:
// stub must carry them out (X86StubFor), and a thread caught at site+5
// gets them carried out by kbox (Restart, X86Move.Apply).
func (p *X86Patcher) PatchSite(si X86SiteInfo, nr uint32, kind StubKind, stub func(slot int) []byte) (*X86Patch, error) {
	site := si.Site
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	if p.sites[site] != nil {
		return nil, ErrPatched
	}
	if p.next >= X86PatchSlots {
		return nil, ErrSlotsFull
	}
	c := p.Mem.Code(site, X86SiteLen)
	if c == nil {
		return nil, ErrNoAlias
	}
	code := stub(p.next)
	if len(code) > X86StubSize {
		return nil, ErrMoves
	}
	slot := p.next
	p.next++
	ptr := p.Mem.SetStub(slot, code)
	p.Mem.SetSlot(slot, ptr)
	pt := &X86Patch{Site: site, Nr: nr, Slot: slot, Kind: kind, Len: si.Len, Moves: si.Moves, Dynamic: si.Dynamic}
	copy(pt.orig[:], c)
	p.write(c, X86Jump(X86SlotAddr(slot)), site)
	p.sites[site] = pt
	p.slots[slot] = pt
	return pt, nil
}

// write changes the 7 bytes at c to nb with the int3-first protocol.
func (p *X86Patcher) write(c []byte, nb [X86SiteLen]byte, site uint64) {
	p.touched[site] = true
	p.Mem.Store1(c, 0, 0xCC)
	p.Mem.Sync()
	for i := 1; i < 5; i++ {
		p.Mem.Store1(c, i, nb[i])
	}
	p.Mem.Store2(c, 5, [2]byte{nb[5], nb[6]})
	p.Mem.Sync()
	p.Mem.Store1(c, 0, nb[0])
	p.Mem.Sync()
}

// Forget drops the patches in [lo, hi). With restore, the original bytes
// are put back first (the range stays mapped: mprotect); without, the
// code is gone (munmap, exec). It returns how many were dropped.
func (p *X86Patcher) Forget(lo, hi uint64, restore bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for a, pt := range p.sites {
		if a+X86SiteLen <= lo || a >= hi {
			continue
		}
		if restore {
			if c := p.Mem.Code(a, X86SiteLen); c != nil {
				p.write(c, pt.orig, a)
			}
		}
		delete(p.sites, a)
		delete(p.slots, pt.Slot)
		n++
	}
	return n
}

// Restart tells where a thread that faulted in patched code goes on:
//   - SIGTRAP at site+1 while the site is changing: back to the site
//     (ToSite);
//   - SIGILL at site+5 of a patched site: it was about to make the
//     syscall (it ran the old mov, or branched there): carry out the
//     site's moves (Site, X86Move.Apply), serve the syscall with its %rax
//     and resume after the syscall, at site+Len (AsSyscall).
func (p *X86Patcher) Restart(ip uint64, sigill bool) (site uint64, r RestartKind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	if sigill {
		if p.sites[ip-5] != nil {
			return ip - 5, AsSyscall
		}
		return 0, NoRestart
	}
	// Patch and Forget hold the lock while the int3 is in place: here it
	// is gone again, unless the int3 is the guest's own.
	if p.touched[ip-1] {
		if c := p.Mem.Code(ip-1, 1); c != nil && c[0] != 0xCC {
			return ip - 1, ToSite
		}
	}
	return 0, NoRestart
}

// Site returns a copy of the patch at site, or false.
func (p *X86Patcher) Site(site uint64) (X86Patch, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pt := p.sites[site]
	if pt == nil {
		return X86Patch{}, false
	}
	return *pt, true
}

// RestartKind is Restart's answer.
type RestartKind int

const (
	NoRestart RestartKind = iota // the fault is the guest's
	ToSite                       // resume at the site
	AsSyscall                    // serve the syscall, resume at site+7
)

// Len is the number of patched sites.
func (p *X86Patcher) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sites)
}

// Reset forgets every patch (exec: the code is gone). Slots and stubs are
// not reused: a thread may still be on its way through one.
func (p *X86Patcher) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sites = map[uint64]*X86Patch{}
	p.slots = map[int]*X86Patch{}
	p.touched = map[uint64]bool{}
}

// InStub maps an address in the stub of a live dynamic site (its offset
// off in the stub of slot) to the same point of the site's own code: the
// stub's `syscall` to the site's, the address after it to the one after
// the site's (x86dyn.go). Other addresses in a stub have no such point:
// false.
func (p *X86Patcher) InStub(slot, off int) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pt := p.slots[slot]
	if pt == nil || !pt.Dynamic {
		return 0, false
	}
	n := 5
	for _, m := range pt.Moves {
		n += len(m.Bytes)
	}
	switch off - X86DynNative(n) {
	case 0:
		return pt.Site + uint64(pt.Len) - 2, true
	case 2:
		return pt.Site + uint64(pt.Len), true
	}
	return 0, false
}
