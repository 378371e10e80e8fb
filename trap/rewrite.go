//go:build linux && amd64 && cgo

package trap

// The rewrite tier (docs/tiers.md, Rewrite tier): the trap tier, plus
// lazy patching of the syscall sites that trap. After a site trapped
// patchAfter times, package rewrite checks it and replaces its
// `mov $nr,%eax; syscall` by a jump through the slot table to a stub that
// enters kbox without a signal (core.c, kbox_rw_entry) or answers
// getpid, getppid and gettid inline. A site whose number is in a register
// gets a stub that enters kbox for the numbers the filter always traps and
// makes the others itself (rwTable, unstub; rewrite/x86dyn.go).

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/rewrite"
	"github.com/kbox-project/kbox/seccomp"
	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// patchAfter is how many times a site traps before it is patched: cold
// sites (start-up, error paths) cost nothing. Checking a site costs about
// 6.5 µs (rewrite's BenchmarkX86FindSite), patching it more (two
// membarriers; the text's alias and scan the first time), a trap about
// 1 µs: with fewer, ls -lR and find patch more sites and run no faster.
const patchAfter = 64

const (
	membarrierQuery            = 0
	membarrierSyncCore         = 32 // MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE
	membarrierRegisterSyncCore = 64 // MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE
)

type rwText struct {
	lo, hi uint64
	view   []byte // the text alias, mapped writable
	// src is the alias's memfd, which the scan reads (X86Text.Src) and
	// which is closed once it has: kbox's process touches only the pages
	// it patches, the guest those it runs.
	src *os.File
	tx  rewrite.X86Text
	// use keeps view mapped while prescan reads it without the patch
	// lock; drop takes it to unmap view.
	use  sync.RWMutex
	dead bool
}

// drop unmaps x's view, once no prescan reads it.
func (x *rwText) drop() {
	x.use.Lock()
	defer x.use.Unlock()
	if !x.dead {
		unix.Munmap(x.view)
		x.src.Close()
		x.dead = true
	}
}

type rwState struct {
	on      bool
	p       rewrite.X86Patcher
	mu      sync.Mutex // counts, texts, stats
	counts  map[uint64]int32
	texts   []*rwText
	area    []byte // slots then stubs, writable view
	stubRX  uint64
	entry   uint64
	patched int
	inline  int
	dynamic int  // patched sites whose number is in a register
	dyn     bool // such sites may be patched: X86DynTable is set
	refused map[string]int
	wx      atomic.Int64
	pmu     sync.Mutex // one patch at a time
}

// initRewrite maps the slot table and the stubs and registers for
// membarrier's core serialisation; an error means the tier cannot run.
func (t *tier) initRewrite() error {
	r := &t.rw
	if r0, _, en := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0); en != 0 || r0&membarrierSyncCore == 0 {
		return fmt.Errorf("rewrite tier: membarrier SYNC_CORE unavailable (%v)", en)
	}
	if _, _, en := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterSyncCore, 0, 0); en != 0 {
		return fmt.Errorf("rewrite tier: membarrier: %w", en)
	}
	fd, err := unix.MemfdCreate("kbox-rewrite", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("rewrite tier: %w", err)
	}
	defer unix.Close(fd)
	size := rewrite.X86SlotBytes + rewrite.X86StubBytes
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fmt.Errorf("rewrite tier: %w", err)
	}
	area, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("rewrite tier: %w", err)
	}
	// The slot table at its fixed address, read-only; the stubs anywhere,
	// read-execute: guest code reaches both, kbox writes through area.
	got, en := mmapRaw(rewrite.X86SlotBase, rewrite.X86SlotBytes, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_FIXED_NOREPLACE, fd, 0)
	if en != 0 || got != rewrite.X86SlotBase {
		if en == 0 {
			unmapRaw(got, rewrite.X86SlotBytes)
			en = unix.EEXIST
		}
		unix.Munmap(area)
		return fmt.Errorf("rewrite tier: slot table at %#x: %w", rewrite.X86SlotBase, en)
	}
	stubs, en := mmapRaw(0, rewrite.X86StubBytes, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_SHARED, fd, rewrite.X86SlotBytes)
	if en != 0 {
		unmapRaw(rewrite.X86SlotBase, rewrite.X86SlotBytes)
		unix.Munmap(area)
		return fmt.Errorf("rewrite tier: stubs: %w", en)
	}
	r.area, r.stubRX, r.entry = area, stubs, rwEntry()
	r.counts = map[uint64]int32{}
	r.refused = map[string]int{}
	r.p.Mem = rwMem{r}
	r.on = true
	return nil
}

// rwTable fills the dynamic stubs' table (rewrite/x86dyn.go) from the
// guest's filter: a number the filter always sends to kbox enters it from
// the stub, but for those that do not return to the site (they keep the
// trap). Without BMI2 (the stubs' flag-free shrx) or a table, sites whose
// number is in a register keep trapping.
func (t *tier) rwTable(pol *seccomp.Policy) {
	r := &t.rw
	if !r.on || !cpu.X86.HasBMI2 {
		return
	}
	always, err := pol.Unconditional(rewrite.X86DynNrs)
	if err != nil {
		return
	}
	tab := r.area[rewrite.X86DynTable-rewrite.X86SlotBase:][:rewrite.X86DynNrs]
	for nr, a := range always {
		tab[nr] = 0
		if a && !noReturn(nr) {
			tab[nr] = 1
		}
	}
	binary.LittleEndian.PutUint64(r.area[8*rewrite.X86DynEntrySlot:], r.entry)
	r.dyn = true
}

// unstub moves a thread stopped at a dynamic stub's own syscall (rewound
// for a restart), or right after it, to the same point of the site's own
// code, before kbox delivers a signal or resumes it: a guest's handler
// sees (and may change) an address of its own code, as musl's
// cancellation does (__cp_begin ... __cp_end), and a restart goes to the
// site's syscall (at a site of 7 bytes, the patch's SIGILL: rwFault).
func (t *tier) unstub(g *[23]uint64) {
	r := &t.rw
	ip := g[regRIP]
	if !r.dyn || ip < r.stubRX || ip >= r.stubRX+rewrite.X86StubBytes {
		return
	}
	off := int(ip - r.stubRX)
	if to, ok := r.p.InStub(off/rewrite.X86StubSize, off%rewrite.X86StubSize); ok {
		g[regRIP] = to
	}
}

// noReturn: a syscall that does not return to its site.
func noReturn(nr int) bool {
	switch nr {
	case unix.SYS_RT_SIGRETURN, unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_EXIT, unix.SYS_EXIT_GROUP:
		return true
	}
	return false
}

// rwClose unmaps the slot table and the stubs (the tier did not start:
// the seccomp tier runs the guest instead).
func (t *tier) rwClose() {
	r := &t.rw
	if !r.on {
		return
	}
	unmapRaw(rewrite.X86SlotBase, rewrite.X86SlotBytes)
	unmapRaw(r.stubRX, rewrite.X86StubBytes)
	unix.Munmap(r.area)
	r.on = false
}

// rwReset forgets every patch and text (exec: the old image is gone).
func (t *tier) rwReset() {
	r := &t.rw
	if !r.on {
		return
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.p.Reset()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.texts {
		x.drop()
	}
	r.texts = nil
	r.counts = map[uint64]int32{}
}

// rwForget drops the patches and trap counts in [lo, hi): restore puts
// the original bytes back (mprotect: the code stays mapped); gone also
// drops the texts there (munmap, mremap, MAP_FIXED: the code is gone).
func (t *tier) rwForget(lo, hi uint64, restore, gone bool) {
	r := &t.rw
	if !r.on {
		return
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.p.Forget(lo, hi, restore)
	r.mu.Lock()
	defer r.mu.Unlock()
	for ip := range r.counts {
		if ip > lo && ip <= hi+rewrite.X86SiteLen+rewrite.X86MaxMoveBytes {
			delete(r.counts, ip)
		}
	}
	if !gone {
		return
	}
	keep := r.texts[:0]
	for _, x := range r.texts {
		if x.hi <= lo || x.lo >= hi {
			keep = append(keep, x)
			continue
		}
		x.drop()
	}
	r.texts = keep
}

func (r *rwState) textOf(addr uint64, n int) *rwText {
	for _, x := range r.texts {
		if addr >= x.lo && addr+uint64(n) <= x.hi {
			return x
		}
	}
	return nil
}

// trapped counts a trapped syscall at ip (the address after it) and
// patches the site once it has trapped patchAfter times; res is the
// call's result (getpid and friends are answered inline with it).
func (t *tier) trapped(th *thread, ip uint64, nr int, res uint64) {
	r := &t.rw
	if noReturn(nr) || ip >= r.stubRX && ip < r.stubRX+rewrite.X86StubBytes {
		return // not back to the site; a dynamic stub's own syscall
	}
	r.mu.Lock()
	c, seen := r.counts[ip]
	if c < 0 {
		r.mu.Unlock()
		return
	}
	c++
	r.counts[ip] = c
	r.mu.Unlock()
	_ = seen
	if c < patchAfter {
		return
	}
	t.prescan(ip)
	r.pmu.Lock()
	defer r.pmu.Unlock()
	why := t.patch(th, ip, nr, res)
	r.mu.Lock()
	if _, ok := r.counts[ip]; ok {
		r.counts[ip] = -1 // decided: patched or refused for good
	}
	if why == rewrite.ErrPatched.Error() {
		// A restart at a patched site's own syscall (unstub): its
		// site is counted already.
		why = ""
	}
	if why != "" {
		r.refused[why]++
	}
	r.mu.Unlock()
}

// prescan gives the text holding the site before ip its alias (under the
// patch lock) and then its rel32 scan without that lock: the scan takes
// milliseconds for a libc, and the guest's other threads' mprotect and
// munmap, which forget patches under the lock, would wait as long
// (git's threads did, 3 to 9 ms a run of git status).
func (t *tier) prescan(ip uint64) {
	r := &t.rw
	site := ip - rewrite.X86SiteLen
	r.mu.Lock()
	x := r.textOf(site, rewrite.X86SiteLen)
	r.mu.Unlock()
	if x == nil {
		r.pmu.Lock()
		r.mu.Lock()
		x = r.textOf(site, rewrite.X86SiteLen)
		r.mu.Unlock()
		if x == nil {
			x, _ = t.aliasMapping(site) // patch says why not, if not
		}
		r.pmu.Unlock()
		if x == nil {
			return
		}
	}
	x.use.RLock()
	defer x.use.RUnlock()
	if !x.dead {
		x.tx.Scan()
		x.src.Close() // a second Close is an error, and harmless
	}
}

// patch patches the site before ip, or says why not.
func (t *tier) patch(th *thread, ip uint64, nr int, res uint64) string {
	r := &t.rw
	r.mu.Lock()
	x := r.textOf(ip-rewrite.X86SiteLen, rewrite.X86SiteLen)
	r.mu.Unlock()
	if x == nil {
		var why string
		if x, why = t.aliasMapping(ip - rewrite.X86SiteLen); x == nil {
			return why
		}
	}
	si, err := rewrite.X86FindSite(&x.tx, ip, uint32(nr), r.dyn)
	if err != nil {
		return err.Error()
	}
	site, ret, mv := si.Site, si.Site+uint64(si.Len), si.Moves
	kind := rewrite.StubCall
	stub := func(int) []byte {
		return rewrite.X86StubFor(uint32(nr), mv, rewrite.X86StubCall(uint32(nr), ret, r.entry))
	}
	switch {
	case si.Dynamic:
		stub = func(int) []byte { return rewrite.X86StubDyn(si.Lead, mv, ret) }
	case (nr == unix.SYS_GETPID && int64(res) > 0 || nr == unix.SYS_GETPPID && int64(res) >= 0) && res < 1<<31:
		// The guest's pid is kbox's; its parent is outside it: 0
		// (dispatch's getppid).
		kind = rewrite.StubConst
		stub = func(int) []byte { return rewrite.X86StubFor(uint32(nr), mv, rewrite.X86StubConst(uint32(res), ret)) }
	case nr == unix.SYS_GETTID && res == uint64(th.k.Tid):
		kind = rewrite.StubGS
		stub = func(int) []byte { return rewrite.X86StubFor(uint32(nr), mv, rewrite.X86StubGS32(ktOffTid, ret)) }
	}
	if _, err := r.p.PatchSite(si, uint32(nr), kind, stub); err != nil {
		return err.Error()
	}
	r.mu.Lock()
	r.patched++
	if kind != rewrite.StubCall {
		r.inline++
	}
	if si.Dynamic {
		r.dynamic++
	}
	r.mu.Unlock()
	if t.cfg.Verbose && si.Dynamic {
		fmt.Fprintf(os.Stderr, "kbox: rewrite: patched a site taking the number from a register (syscall %d first) at %#x%s\n", nr, site, movesNote(len(mv)))
	} else if t.cfg.Verbose {
		fmt.Fprintf(os.Stderr, "kbox: rewrite: patched syscall %d at %#x%s\n", nr, site, movesNote(len(mv)))
	}
	return ""
}

// aliasMapping gives guest code a text alias when a site there is first
// patched (the loader's segments, a library ld.so mapped, code the guest
// mapped itself): the mapping's bytes are copied into a memfd mapped
// MAP_SHARED over the same range, same protection, and kept mapped
// writable for the patches. The bytes are the same, so a thread running
// there meanwhile notices nothing (the kernel replaces the pages under
// its mmap lock). Only private, read-execute mappings wholly the guest's.
func (t *tier) aliasMapping(addr uint64) (*rwText, string) {
	lo, hi, ok := execMapping(addr)
	if !ok {
		return nil, "not in a read-execute private mapping"
	}
	if !t.mem.contains(lo, hi) {
		return nil, "not the guest's memory"
	}
	n := int(hi - lo)
	fd, err := unix.MemfdCreate("kbox-text", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, "memfd: " + err.Error()
	}
	src := os.NewFile(uintptr(fd), "kbox-text")
	// The kernel copies the code into the memfd (no page of it faulted
	// in and zeroed first, as a copy through the view did: 0.5 ms of a
	// libc's 1.4 MB), then the view maps the pages.
	if !fileFrom(fd, lo, n) {
		src.Close()
		return nil, "code not readable"
	}
	v, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		src.Close()
		return nil, "alias: " + err.Error()
	}
	if got, en := mmapRaw(lo, n, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_SHARED|unix.MAP_FIXED, fd, 0); en != 0 || got != lo {
		unix.Munmap(v)
		src.Close()
		return nil, "alias mapping failed"
	}
	x := &rwText{lo: lo, hi: hi, view: v, src: src}
	x.tx = rewrite.X86Text{Base: lo, Code: v, Src: src}
	r := &t.rw
	r.mu.Lock()
	r.texts = append(r.texts, x)
	r.mu.Unlock()
	return x, ""
}

// execMapping finds the mapping of kbox's process holding addr in
// /proc/self/maps: its range when it is private and read-execute.
func execMapping(addr uint64) (lo, hi uint64, ok bool) {
	m, err := hostproc.Read("/proc/self/maps")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(m), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, b, _ := strings.Cut(f[0], "-")
		l, err1 := strconv.ParseUint(a, 16, 64)
		h, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil || addr < l || addr >= h {
			continue
		}
		return l, h, f[1] == "r-xp"
	}
	return 0, 0, false
}

// rwFault handles a SIGILL or SIGTRAP in patched code (rewrite.Restart):
// true when it was kbox's, not the guest's.
func (th *thread) rwFault(sig int) bool {
	r := &tr.rw
	if !r.on || sig != int(unix.SIGILL) && sig != int(unix.SIGTRAP) {
		return false
	}
	g := &th.k.Gregs
	site, k := r.p.Restart(g[regRIP], sig == int(unix.SIGILL))
	switch k {
	case rewrite.ToSite:
		g[regRIP] = site
		return true
	case rewrite.AsSyscall:
		// The syscall the thread was about to make at site+5, with its
		// own %rax, after the site's moves (an extended site), returning
		// after the syscall as the kernel would.
		ret := site + rewrite.X86SiteLen
		if pt, ok := r.p.Site(site); ok {
			ret = site + uint64(pt.Len)
			for _, m := range pt.Moves {
				m.Apply(func(reg int) uint64 { return g[x86Greg[reg]] }, func(reg int, v uint64) { g[x86Greg[reg]] = v })
			}
		}
		th.k.Nr = int32(g[regRAX])
		g[regRIP], g[regRCX], g[regR11] = ret, ret, g[regEFL]
		th.syscall()
		return true
	}
	return false
}

// live is the tier running (or last run), for Sites: read from the
// observatory's sampler, another goroutine.
var live atomic.Pointer[tier]

// Sites reports the sites of the in-process tier running the guest (or
// last run), live; false when none ran.
func Sites() (SiteStats, bool) {
	t := live.Load()
	if t == nil {
		return SiteStats{}, false
	}
	return t.siteStats(), true
}

// siteStats reports the sites.
func (t *tier) siteStats() SiteStats {
	r := &t.rw
	s := SiteStats{WX: int(r.wx.Load())}
	if !r.on {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Seen = r.patched
	for _, c := range r.counts {
		if c > 0 {
			s.Seen++ // trapping, below patchAfter
		}
	}
	for _, v := range r.refused {
		s.Seen += v
	}
	s.Patched, s.Inline, s.Dynamic = r.patched, r.inline, r.dynamic
	s.Refused = map[string]int{}
	for k, v := range r.refused {
		s.Refused[k] = v
	}
	return s
}

// rwMem is rewrite.X86Mem over the text aliases and the slot area.
type rwMem struct{ r *rwState }

func (m rwMem) Code(addr uint64, n int) []byte {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	x := m.r.textOf(addr, n)
	if x == nil {
		return nil
	}
	return x.view[addr-x.lo:]
}

func (m rwMem) Store1(b []byte, i int, v byte)    { b[i] = v }
func (m rwMem) Store2(b []byte, i int, v [2]byte) { store2(b, i, v) }

func (m rwMem) Sync() {
	unix.Syscall(unix.SYS_MEMBARRIER, membarrierSyncCore, 0, 0)
}

func (m rwMem) SetSlot(i int, p uint64) {
	binary.LittleEndian.PutUint64(m.r.area[8*i:], p)
}

func (m rwMem) SetStub(i int, code []byte) uint64 {
	off := rewrite.X86SlotBytes + i*rewrite.X86StubSize
	copy(m.r.area[off:off+rewrite.X86StubSize], code)
	return m.r.stubRX + uint64(i*rewrite.X86StubSize)
}

// wxRefused reports (and counts) a mapping asking for write and execute
// at once: refused in the in-process tiers, whose patching relies on
// guest code never being writable where it runs.
func (t *tier) wxRefused(prot uint64) bool {
	if prot&unix.PROT_WRITE == 0 || prot&unix.PROT_EXEC == 0 {
		return false
	}
	t.rw.wx.Add(1)
	t.note("wx", "in-process tier: a mapping both writable and executable was refused (EACCES)")
	return true
}

// x86Greg maps an x86 register number (rax 0 ... r15 15) to its index in
// the saved registers (ucontext's order).
var x86Greg = [16]int{13, 14, 12, 11, 15, 10, 9, 8, 0, 1, 2, 3, 4, 5, 6, 7}

// movesNote is -v's note on an extended site.
func movesNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d moves displaced)", n)
}

// ktOffTid is the offset of tid in struct kbox_thread (checkLayout).
const ktOffTid = 228

func mmapRaw(addr uint64, n int, prot, flags, fd int, off int64) (uint64, unix.Errno) {
	r, _, en := unix.Syscall6(unix.SYS_MMAP, uintptr(addr), uintptr(n), uintptr(prot), uintptr(flags), uintptr(fd), uintptr(off))
	return uint64(r), en
}

func unmapRaw(addr uint64, n int) {
	unix.Syscall(unix.SYS_MUNMAP, uintptr(addr), uintptr(n), 0)
}
