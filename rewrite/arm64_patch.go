package rewrite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
)

// ErrArm64NoReach is returned when no stub is in B reach of a site and no
// veneer slot is either: the site keeps trapping.
var ErrArm64NoReach = errors.New("rewrite/arm64: no stub or veneer in reach of the site")

// Arm64Alias is a writable view of code (guest text through its memfd
// alias, or a pool) by the address the code runs at.
type Arm64Alias interface {
	Load32(addr uint64) (uint32, error)
	// Store32 writes one aligned word. For guest text it must be a
	// single-copy atomic 32-bit store (Arm64SliceAlias over the mapped
	// alias is); a pool is written before anything branches to it, so a
	// plain write does there.
	Store32(addr uint64, w uint32) error
}

// Arm64FileAlias writes through an io.WriterAt (a memfd with pwrite, a
// file) whose offset 0 is the code at Base. pwrite gives no atomicity
// guarantee: use it for pools, not for live guest text.
type Arm64FileAlias struct {
	Base uint64
	F    interface {
		io.ReaderAt
		io.WriterAt
	}
}

func (a Arm64FileAlias) off(addr uint64) (int64, error) {
	if addr%4 != 0 {
		return 0, fmt.Errorf("%w: word at %#x", ErrArm64Align, addr)
	}
	if addr < a.Base || addr-a.Base > 1<<62 {
		return 0, fmt.Errorf("rewrite/arm64: %#x is below the alias at %#x", addr, a.Base)
	}
	return int64(addr - a.Base), nil
}

// Load32 reads the word at addr.
func (a Arm64FileAlias) Load32(addr uint64) (uint32, error) {
	off, err := a.off(addr)
	if err != nil {
		return 0, err
	}
	var b [4]byte
	if _, err := a.F.ReadAt(b[:], off); err != nil {
		return 0, fmt.Errorf("rewrite/arm64: read %#x: %w", addr, err)
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// Store32 writes the word at addr.
func (a Arm64FileAlias) Store32(addr uint64, w uint32) error {
	off, err := a.off(addr)
	if err != nil {
		return err
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], w)
	if _, err := a.F.WriteAt(b[:], off); err != nil {
		return fmt.Errorf("rewrite/arm64: write %#x: %w", addr, err)
	}
	return nil
}

// Arm64Pool is a region of kbox-made executable memory for stubs and
// veneers: Base is where it runs, Alias how it is written. Slots freed by
// Unpatch and Forget are retired, not reused, until Reclaim: a thread may
// still be inside a stub when its site is dropped. A pool belongs to one
// Arm64Patcher, whose lock guards it.
type Arm64Pool struct {
	Base, Size uint64
	Alias      Arm64Alias

	next    uint64
	free    map[uint64][]uint64 // slot size -> addresses
	retired map[uint64][]uint64
}

// alloc returns a slot of size bytes (aligned to its size's alignment:
// 32 for veneers, 8 for stubs) for which ok holds.
func (p *Arm64Pool) alloc(size uint64, ok func(uint64) bool) (uint64, bool) {
	fl := p.free[size]
	for i, a := range fl {
		if ok(a) {
			p.free[size] = append(fl[:i:i], fl[i+1:]...)
			return a, true
		}
	}
	align := uint64(8)
	if size == Arm64VeneerSize {
		align = 32
	}
	a := (p.Base + p.next + align - 1) &^ (align - 1)
	if a+size > p.Base+p.Size || a < p.Base || !ok(a) {
		return 0, false
	}
	p.next = a + size - p.Base
	return a, true
}

func (p *Arm64Pool) put(m *map[uint64][]uint64, size, a uint64) {
	if *m == nil {
		*m = map[uint64][]uint64{}
	}
	(*m)[size] = append((*m)[size], a)
}

func (p *Arm64Pool) write(addr uint64, words []uint32) error {
	for i, w := range words {
		if err := p.Alias.Store32(addr+uint64(i)*4, w); err != nil {
			return err
		}
	}
	return nil
}

// Arm64Patcher patches trapped `svc #0` sites into branches to per-site
// stubs, and keeps the table of patched sites. Safe for concurrent use.
type Arm64Patcher struct {
	Text  Arm64Alias   // guest text, by run address
	Pools []*Arm64Pool // where stubs and veneers go
	Entry uint64       // the dispatch entry the stubs call
	// Sync makes n bytes of new code at addr visible to instruction
	// fetch on every CPU. On the real path it is the equivalent of
	// __builtin___clear_cache: DC CVAU over the lines (through the alias
	// or the run address: same physical lines), DSB ISH, IC IVAU over
	// the run addresses, DSB ISH, ISB. nil does nothing (tests).
	Sync func(addr, n uint64)

	mu      sync.Mutex
	patches map[uint64]*arm64Patch
}

type arm64Patch struct {
	site, stub, veneer uint64
	orig, b            uint32
	stubPool, venPool  *Arm64Pool
}

// Arm64Patch describes one patched site.
type Arm64Patch struct {
	Site   uint64
	Stub   uint64
	Veneer uint64 // 0 when the site branches to its stub directly
	Orig   uint32 // the word the patch replaced (svc #0)
	B      uint32 // the word at the site now
}

func (p *Arm64Patcher) sync(addr, n uint64) {
	if p.Sync != nil {
		p.Sync(addr, n)
	}
}

// arm64Near reports whether [a, a+size) is in B reach of the site both
// ways (the site's B to a, and any B in the slot back to site+4).
func arm64Near(site, a, size uint64) bool {
	return Arm64BReaches(site, a) && Arm64BReaches(site, a+size-4) &&
		Arm64BReaches(a, site+4) && Arm64BReaches(a+size-4, site+4)
}

// Patch replaces the site's `svc #0` with a B to a new stub (through a
// veneer when the stub is out of reach). The stub and veneer are written
// and synced before the site's word, so a thread that fetches the new B
// finds them in place; a thread that still fetches the old svc traps as
// before. Patching a site twice is a no-op.
func (p *Arm64Patcher) Patch(s Arm64Site) (Arm64Patch, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pa, ok := p.patches[s.Addr]; ok {
		return pa.public(), nil
	}
	if s.Addr%4 != 0 {
		return Arm64Patch{}, fmt.Errorf("%w: site %#x", ErrArm64Align, s.Addr)
	}
	if p.Entry == 0 {
		return Arm64Patch{}, errors.New("rewrite/arm64: patcher has no entry")
	}
	orig, err := p.Text.Load32(s.Addr)
	if err != nil {
		return Arm64Patch{}, err
	}
	if orig != Arm64SVC0 {
		return Arm64Patch{}, fmt.Errorf("%w: %#08x at %#x is not svc #0 any more", ErrArm64NotSite, orig, s.Addr)
	}
	pa := &arm64Patch{site: s.Addr, orig: orig}
	// A stub in reach first: one B each way, no veneer.
	for _, pool := range p.Pools {
		if a, ok := pool.alloc(Arm64StubSlot, func(a uint64) bool { return arm64Near(s.Addr, a, Arm64StubSlot) }); ok {
			pa.stub, pa.stubPool = a, pool
			break
		}
	}
	if pa.stubPool == nil {
		for _, pool := range p.Pools {
			if a, ok := pool.alloc(Arm64StubSlot, func(uint64) bool { return true }); ok {
				pa.stub, pa.stubPool = a, pool
				break
			}
		}
		if pa.stubPool == nil {
			return Arm64Patch{}, fmt.Errorf("%w: %#x: every pool is full", ErrArm64NoReach, s.Addr)
		}
		for _, pool := range p.Pools {
			if a, ok := pool.alloc(Arm64VeneerSize, func(a uint64) bool { return arm64Near(s.Addr, a, Arm64VeneerSize) }); ok {
				pa.veneer, pa.venPool = a, pool
				break
			}
		}
		if pa.venPool == nil {
			pa.stubPool.put(&pa.stubPool.free, Arm64StubSlot, pa.stub)
			return Arm64Patch{}, fmt.Errorf("%w: %#x (stub at %#x)", ErrArm64NoReach, s.Addr, pa.stub)
		}
	}
	if err := p.install(pa); err != nil {
		// Nothing branches to the slots yet: they can be reused at once.
		pa.stubPool.put(&pa.stubPool.free, Arm64StubSlot, pa.stub)
		if pa.venPool != nil {
			pa.venPool.put(&pa.venPool.free, Arm64VeneerSize, pa.veneer)
		}
		return Arm64Patch{}, err
	}
	if p.patches == nil {
		p.patches = map[uint64]*arm64Patch{}
	}
	p.patches[s.Addr] = pa
	return pa.public(), nil
}

func (p *Arm64Patcher) install(pa *arm64Patch) error {
	st := Arm64Stub{Site: pa.site, Addr: pa.stub, Entry: p.Entry}
	target := pa.stub
	if pa.venPool != nil {
		st.Return = pa.veneer + Arm64VeneerReturn
		target = pa.veneer
	}
	code, err := Arm64StubCode(st)
	if err != nil {
		return err
	}
	b, err := Arm64B(pa.site, target)
	if err != nil {
		return err
	}
	if err := pa.stubPool.write(pa.stub, code); err != nil {
		return err
	}
	p.sync(pa.stub, uint64(len(code))*4)
	if pa.venPool != nil {
		ven, err := Arm64VeneerCode(pa.site, pa.veneer, pa.stub)
		if err != nil {
			return err
		}
		if err := pa.venPool.write(pa.veneer, ven); err != nil {
			return err
		}
		p.sync(pa.veneer, Arm64VeneerSize)
	}
	// The one store other threads can see: svc -> B, both in the
	// architecture's list of instructions that may be modified while
	// another CPU executes them (each sees the old or the new word).
	if err := p.Text.Store32(pa.site, b); err != nil {
		return err
	}
	pa.b = b
	p.sync(pa.site, 4)
	return nil
}

func (pa *arm64Patch) public() Arm64Patch {
	return Arm64Patch{Site: pa.site, Stub: pa.stub, Veneer: pa.veneer, Orig: pa.orig, B: pa.b}
}

// Lookup returns the patch at site.
func (p *Arm64Patcher) Lookup(site uint64) (Arm64Patch, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pa, ok := p.patches[site]
	if !ok {
		return Arm64Patch{}, false
	}
	return pa.public(), true
}

// Patches returns every patch, by site address.
func (p *Arm64Patcher) Patches() []Arm64Patch {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Arm64Patch, 0, len(p.patches))
	for _, pa := range p.patches {
		out = append(out, pa.public())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Site < out[j].Site })
	return out
}

// Unpatch restores the original word of every site in [lo, hi) whose word
// is still the patch's B, and drops them from the table: for mprotect,
// after which the guest may read or write its text again. A site whose
// word changed since (the guest rewrote it) is left as it is. It returns
// how many sites were dropped.
func (p *Arm64Patcher) Unpatch(lo, hi uint64) (int, error) {
	return p.drop(lo, hi, true)
}

// Forget drops every site in [lo, hi) from the table without writing:
// for munmap and exec, when the text is gone.
func (p *Arm64Patcher) Forget(lo, hi uint64) int {
	n, _ := p.drop(lo, hi, false)
	return n
}

func (p *Arm64Patcher) drop(lo, hi uint64, restore bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	var firstErr error
	for site, pa := range p.patches {
		if site < lo || site >= hi {
			continue
		}
		if restore {
			w, err := p.Text.Load32(site)
			if err == nil && w == pa.b {
				err = p.Text.Store32(site, pa.orig)
				if err == nil {
					p.sync(site, 4)
				}
			}
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue // stays in the table: still patched
			}
		}
		delete(p.patches, site)
		pa.stubPool.put(&pa.stubPool.retired, Arm64StubSlot, pa.stub)
		if pa.venPool != nil {
			pa.venPool.put(&pa.venPool.retired, Arm64VeneerSize, pa.veneer)
		}
		n++
	}
	return n, firstErr
}

// Reclaim makes the slots of dropped sites reusable. Call it only when no
// guest thread can be inside one of their stubs or veneers (every guest
// thread stopped outside them, or the image ended by exec with its other
// threads gone).
func (p *Arm64Patcher) Reclaim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pool := range p.Pools {
		for size, as := range pool.retired {
			for _, a := range as {
				pool.put(&pool.free, size, a)
			}
		}
		pool.retired = nil
	}
}
