package elfload

import (
	"cmp"
	"crypto/rand"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Error is a load that failed: what went wrong, in words, and the errno
// execve would give for it (ENOEXEC for a malformed file, ELIBBAD for a
// bad interpreter, E2BIG for arguments, EEXIST for an address in use,
// ENOMEM, ...). errors.Is(err, unix.ENOEXEC) works.
type Error struct {
	Msg   string
	Errno unix.Errno
}

func (e *Error) Error() string { return "elfload: " + e.Msg }
func (e *Error) Unwrap() error { return e.Errno }

func sysError(errno error, format string, args ...any) error {
	en, ok := errno.(unix.Errno)
	if !ok {
		en = unix.EIO
	}
	return &Error{Msg: fmt.Sprintf(format, args...) + ": " + errno.Error(), Errno: en}
}

// Image is one ELF file to map. When Bytes is nil the file is FD, read
// with pread (its offset is left alone) and mapped MAP_PRIVATE: a sealed
// memfd, as dispatch.ReadProgram makes, or any regular file. Load does not
// take FD: the caller closes it when it likes (the mappings keep the file).
type Image struct {
	Name  string // for messages and the names of the loader's memfds
	FD    int
	Bytes []byte
}

// Spec is what to load and with what arguments.
type Spec struct {
	Prog   Image
	Interp *Image // the program's PT_INTERP interpreter; nil for a static program
	Argv   []string
	Envp   []string
	ExecFn string // AT_EXECFN: the path execve was given; Prog.Name when empty

	UID, EUID, GID, EGID uint32 // the guest's (emulated) ids, for auxv
	Secure               bool   // AT_SECURE

	StackSize int // bytes of stack; 0 means DefaultStackSize
	BrkSize   int // bytes reserved for the break; 0 means DefaultBrkSize
}

// DefaultStackSize is the stack Spec.StackSize 0 gives: the usual
// RLIMIT_STACK.
const DefaultStackSize = 8 << 20

// Size bounds of Spec.StackSize and Spec.BrkSize.
const (
	minStackSize = 64 << 10
	maxStackSize = 1 << 30
	maxBrkSize   = 1 << 40
	stackGuard   = 1 << 20 // PROT_NONE below the stack, as Linux's stack_guard_gap
)

// RegionKind says what a Region holds.
type RegionKind uint8

const (
	// RegionText is an executable segment, mapped MAP_SHARED from its text
	// alias (Loaded.TextAliases).
	RegionText RegionKind = iota + 1
	// RegionSegment is any other segment's file part (read-only data,
	// RELRO, data), mapped MAP_PRIVATE from the file.
	RegionSegment
	// RegionBss is a segment's zero pages beyond its file part.
	RegionBss
	// RegionGap is PROT_NONE address space between an object's segments,
	// part of its reservation.
	RegionGap
	// RegionStack is the initial thread's stack.
	RegionStack
	// RegionGuard is PROT_NONE address space around the stack.
	RegionGuard
	// RegionBrk is the break's reservation (Loaded.Brk).
	RegionBrk
)

var regionNames = [...]string{"?", "text", "segment", "bss", "gap", "stack", "guard", "brk"}

func (k RegionKind) String() string {
	if int(k) < len(regionNames) {
		return regionNames[k]
	}
	return "?"
}

// Region is one range of guest memory the loader made: [Start, End),
// page-aligned.
type Region struct {
	Start, End uintptr
	Kind       RegionKind
	Prot       int  // as mapped (PROT_NONE for gaps, guards and the break's reserve)
	Interp     bool // part of the interpreter's image
}

// Loaded is a program mapped in this process, ready to start: a thread
// that kbox creates (never a Go thread) sets its stack pointer to SP and
// jumps to Entry, with the registers the ABI wants at process entry.
type Loaded struct {
	Entry uintptr // where to start: the interpreter's entry for a dynamic program
	SP    uintptr // the initial stack pointer: argc, 16-byte aligned

	ProgEntry  uintptr // the program's own entry (AT_ENTRY)
	Phdr       uintptr // AT_PHDR
	Base       uintptr // the program's load bias (0 for ET_EXEC)
	InterpBase uintptr // the interpreter's (AT_BASE), 0 without one
	ExecStack  bool    // the stack was made executable (PT_GNU_STACK with PF_X)

	// Regions is every range mapped, sorted by address, not overlapping:
	// the guest's memory, which the trap tier keeps guest munmap,
	// mprotect and MAP_FIXED inside.
	Regions []Region
	Brk     *Brk
	Auxv    [][2]uint64 // the auxv on the stack, in order, AT_NULL left out
	// Args are where the argument and environment strings lie on the
	// stack: [argStart, argEnd, envStart, envEnd), as Linux's mm has them
	// for /proc/PID/cmdline and environ.
	Args [4]uint64

	mu       sync.Mutex
	spans    [][2]uintptr // reservations to unmap
	unmapped bool
}

// Unmap releases everything the load made: its mappings, its memfds, the
// break. The program must not run any more. Safe to call twice.
func (l *Loaded) Unmap() { l.release(true) }

// Release releases the load's memfds and break but leaves its mappings
// alone: for a caller that tracks the program's memory itself (the trap
// tier's guard: the program may have unmapped parts of what Load mapped,
// and that address space may be someone else's now) and unmaps it once.
// Unmapping Load's ranges as well would unmap whatever another thread
// mapped there in between. The program must not run any more. Safe to
// call twice, and with Unmap.
func (l *Loaded) Release() { l.release(false) }

func (l *Loaded) release(unmap bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unmapped {
		return
	}
	l.unmapped = true
	if l.Brk != nil {
		l.Brk.close()
	}
	if unmap {
		for _, s := range l.spans {
			munmap(s[0], s[1]-s[0])
		}
	}
	l.spans = nil
}

// traceSpan, when set (tests), sees every reservation made.
var traceSpan func(start, end uintptr)

func (l *Loaded) addSpan(start, end uintptr) {
	l.spans = append(l.spans, [2]uintptr{start, end})
	if traceSpan != nil {
		traceSpan(start, end)
	}
}

// hostMachine is the ELF machine of this process.
func hostMachine() (elf.Machine, error) {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64, nil
	case "arm64":
		return elf.EM_AARCH64, nil
	}
	return 0, &Error{Msg: "no loader for " + runtime.GOARCH, Errno: unix.ENOEXEC}
}

// source is an Image opened for loading: a reader for the planner and the
// text copies, and an fd to map from.
type source struct {
	name  string
	r     io.ReaderAt
	size  int64
	fd    int
	owned bool // fd is a memfd Load made from Bytes
}

func openImage(im *Image) (*source, error) {
	name := im.Name
	if name == "" {
		name = "program"
	}
	if im.Bytes != nil {
		s := &source{name: name, r: bytesReader(im.Bytes), size: int64(len(im.Bytes)), fd: -1}
		return s, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(im.FD, &st); err != nil {
		return nil, sysError(err, "%s", name)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &Error{Msg: name + ": not a regular file", Errno: unix.EACCES}
	}
	return &source{name: name, r: fdReader(im.FD), size: st.Size, fd: im.FD}, nil
}

// mapFD returns an fd to map the image from: its own, or for Bytes a
// sealed memfd holding them.
func (s *source) mapFD() (int, error) {
	if s.fd >= 0 {
		return s.fd, nil
	}
	b := []byte(s.r.(bytesReader))
	fd, err := newMemfd("kbox-elf:"+s.name, int64(len(b)))
	if err != nil {
		return -1, sysError(err, "%s: memfd", s.name)
	}
	if err := pwriteAll(fd, b, 0); err != nil {
		unix.Close(fd)
		return -1, sysError(err, "%s: memfd", s.name)
	}
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	s.fd, s.owned = fd, true
	return fd, nil
}

func (s *source) close() {
	if s.owned {
		unix.Close(s.fd)
	}
}

// Load maps spec's program (and its interpreter) into this process and
// builds its initial stack. Nothing runs. On error nothing is left mapped.
//
// Placement: an ET_DYN object's load base is chosen by the kernel (one
// PROT_NONE reservation of its whole span, aligned to its largest
// p_align, with a NULL hint), then its segments are mapped inside with
// MAP_FIXED. An ET_EXEC object's span is reserved at its own addresses
// with MAP_FIXED_NOREPLACE: when anything (kbox, the Go heap, LKL) is
// there the load fails with "cannot load NAME at 0x...: address in use".
// The program's reservation also covers its break's (Brk).
func Load(spec *Spec) (_ *Loaded, err error) {
	machine, err := hostMachine()
	if err != nil {
		return nil, err
	}
	pg := uint64(os.Getpagesize())
	stackSize := uint64(spec.StackSize)
	if spec.StackSize == 0 {
		stackSize = DefaultStackSize
	}
	brkSize := uint64(spec.BrkSize)
	if spec.BrkSize == 0 {
		brkSize = DefaultBrkSize
	}
	if spec.StackSize < 0 || stackSize < minStackSize || stackSize > maxStackSize {
		return nil, &Error{Msg: fmt.Sprintf("stack size %d outside [%d, %d]", spec.StackSize, minStackSize, maxStackSize), Errno: unix.EINVAL}
	}
	if spec.BrkSize < 0 || brkSize > maxBrkSize {
		return nil, &Error{Msg: fmt.Sprintf("break size %d outside [0, %d]", spec.BrkSize, uint64(maxBrkSize)), Errno: unix.EINVAL}
	}
	stackSize, brkSize = pageUp(stackSize, pg), pageUp(brkSize, pg)

	prog, err := openImage(&spec.Prog)
	if err != nil {
		return nil, err
	}
	defer prog.close()
	po, err := plan(prog.name, prog.r, prog.size, machine, pg)
	if err != nil {
		return nil, err
	}
	var interp *source
	var iobj *object
	switch {
	case po.interp != "" && spec.Interp == nil:
		return nil, &Error{Msg: fmt.Sprintf("%s: needs its interpreter %s", prog.name, po.interp), Errno: unix.ENOEXEC}
	case po.interp == "" && spec.Interp != nil:
		return nil, &Error{Msg: fmt.Sprintf("%s: static program given an interpreter", prog.name), Errno: unix.EINVAL}
	case spec.Interp != nil:
		if interp, err = openImage(spec.Interp); err != nil {
			return nil, libbad(err)
		}
		defer interp.close()
		if iobj, err = plan(interp.name, interp.r, interp.size, machine, pg); err != nil {
			return nil, libbad(err)
		}
		if iobj.interp != "" {
			return nil, &Error{Msg: fmt.Sprintf("interpreter %s is itself dynamic (it asks for %s)", interp.name, iobj.interp), Errno: unix.ELIBBAD}
		}
	}

	h := hostAuxv()
	in := &stackInput{
		argv: spec.Argv, envp: spec.Envp, execfn: spec.ExecFn,
		platform: h.platform, basePlatform: h.basePlatform, size: stackSize,
	}
	if in.execfn == "" {
		in.execfn = prog.name
	}
	if err := checkArgs(in); err != nil {
		return nil, err
	}
	if _, err := rand.Read(in.random[:]); err != nil {
		return nil, sysError(err, "AT_RANDOM")
	}

	l := &Loaded{}
	defer func() {
		if err != nil {
			l.Unmap()
		}
	}()
	bias, brkSize, err := l.mapObject(po, prog, brkSize, false, pg)
	if err != nil {
		return nil, err
	}
	l.Base = bias
	l.ProgEntry = bias + uintptr(po.entry)
	l.Phdr = bias + uintptr(po.phdr)
	l.Entry = l.ProgEntry
	brkStart := bias + uintptr(po.end)
	l.Brk = &Brk{Start: brkStart, Limit: brkStart + uintptr(brkSize), cur: brkStart, pg: uintptr(pg)}
	l.Regions = append(l.Regions, Region{Start: brkStart, End: l.Brk.Limit, Kind: RegionBrk, Prot: unix.PROT_NONE})
	if iobj != nil {
		ibias, _, err := l.mapObject(iobj, interp, 0, true, pg)
		if err != nil {
			return nil, err
		}
		l.InterpBase = ibias
		l.Entry = ibias + uintptr(iobj.entry)
	}

	in.aux = guestAuxv(h, &auxFacts{
		phdr: uint64(l.Phdr), phnum: uint64(po.phnum), base: uint64(l.InterpBase), entry: uint64(l.ProgEntry),
		uid: spec.UID, euid: spec.EUID, gid: spec.GID, egid: spec.EGID, secure: spec.Secure,
	})
	if err := l.mapStack(in, po.execStack, pg); err != nil {
		return nil, err
	}
	sortRegions(l.Regions)
	return l, nil
}

// libbad turns an interpreter's format error into ELIBBAD, as execve says.
func libbad(err error) error {
	if e, ok := err.(*Error); ok && e.Errno == unix.ENOEXEC {
		return &Error{Msg: "interpreter " + e.Msg, Errno: unix.ELIBBAD}
	}
	return err
}

// reserve takes o's span (and extra bytes after it) and returns the load
// bias and the extra bytes it took. An ET_EXEC object's span is at its own
// addresses; when something is mapped in the extra bytes after it, fewer
// are taken (halving, down to none), as Linux's break ends where the next
// mapping begins: a static program loads wherever its segments are free,
// and only its brk(2) has less room (malloc falls back to mmap). Seen:
// kbox's own mappings landing within the 1 GiB after a program at
// 0x400000 made its load fail now and then.
func (l *Loaded) reserve(o *object, extra uint64, pg uint64) (uintptr, uint64, error) {
	if o.typ == elf.ET_EXEC {
		at := uintptr(o.first)
		for {
			total := uintptr(o.span() + extra)
			got, err := mmap(at, total, unix.PROT_NONE, reserveFlags|unix.MAP_FIXED_NOREPLACE, -1, 0)
			if err == nil && got != at {
				// A kernel before 4.17 takes MAP_FIXED_NOREPLACE as a hint.
				munmap(got, total)
				err = unix.EEXIST
			}
			if err == unix.EEXIST && extra > 0 {
				extra = pageUp(extra/2, pg)
				if extra < 16*pg {
					extra = 0
				}
				continue
			}
			if err == unix.EEXIST {
				return 0, 0, &Error{Msg: fmt.Sprintf("cannot load %s at %#x: address in use (%#x-%#x)", o.name, at, at, at+total), Errno: unix.EEXIST}
			}
			if err != nil {
				return 0, 0, sysError(err, "cannot load %s at %#x", o.name, at)
			}
			l.addSpan(at, at+total)
			return 0, extra, nil
		}
	}
	total := uintptr(o.span() + extra)
	slack := uintptr(o.align - pg)
	got, err := mmap(0, total+slack, unix.PROT_NONE, reserveFlags, -1, 0)
	if err != nil {
		return 0, 0, sysError(err, "cannot reserve %#x bytes for %s", total, o.name)
	}
	start := got + (uintptr(o.first)-got)&uintptr(o.align-1)
	if start > got {
		munmap(got, start-got)
	}
	if end := got + total + slack; end > start+total {
		munmap(start+total, end-start-total)
	}
	l.addSpan(start, start+total)
	return start - uintptr(o.first), extra, nil
}

// mapObject maps o inside a reservation and records its regions. extra
// is address space to keep after it (the break's); it
// returns the bias and how much of extra it kept (reserve).
func (l *Loaded) mapObject(o *object, src *source, extra uint64, interp bool, pg uint64) (uintptr, uint64, error) {
	bias, extra, err := l.reserve(o, extra, pg)
	if err != nil {
		return 0, 0, err
	}
	fd, err := src.mapFD()
	if err != nil {
		return 0, 0, err
	}
	var regions []Region
	add := func(r Region) {
		// A segment that starts in the last page of the one before maps
		// over that page, as in the kernel.
		for len(regions) > 0 && regions[len(regions)-1].End > r.Start {
			last := &regions[len(regions)-1]
			if last.Start >= r.Start {
				regions = regions[:len(regions)-1]
				continue
			}
			last.End = r.Start
		}
		if r.End > r.Start {
			r.Interp = interp
			regions = append(regions, r)
		}
	}
	cur := bias + uintptr(o.first)
	for i := range o.segs {
		s := &o.segs[i]
		start := bias + uintptr(s.vaddr&^(pg-1))
		fileEnd := bias + uintptr(pageUp(s.vaddr+s.filesz, pg))
		memEnd := bias + uintptr(pageUp(s.vaddr+s.memsz, pg))
		if start > cur {
			add(Region{Start: cur, End: start, Kind: RegionGap, Prot: unix.PROT_NONE})
		}
		if s.filesz == 0 {
			fileEnd = start
		} else {
			tail := bias + uintptr(s.vaddr+s.filesz)
			zero := s.memsz > s.filesz && tail < fileEnd
			prot := s.prot
			if zero {
				prot |= unix.PROT_READ | unix.PROT_WRITE
			}
			if _, err := mmap(start, fileEnd-start, prot, unix.MAP_PRIVATE|unix.MAP_FIXED, fd, s.off&^(pg-1)); err != nil {
				return 0, 0, sysError(err, "%s: mapping segment %d at %#x", o.name, i, start)
			}
			if zero {
				clear(mem(tail, int(fileEnd-tail)))
				if prot != s.prot {
					if err := mprotect(start, fileEnd-start, s.prot); err != nil {
						return 0, 0, sysError(err, "%s: segment %d", o.name, i)
					}
				}
			}
			kind := RegionSegment
			if s.exec() {
				kind = RegionText
			}
			add(Region{Start: start, End: fileEnd, Kind: kind, Prot: s.prot})
		}
		if memEnd > fileEnd {
			if _, err := mmap(fileEnd, memEnd-fileEnd, s.prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED, -1, 0); err != nil {
				return 0, 0, sysError(err, "%s: mapping %#x bytes of bss at %#x", o.name, memEnd-fileEnd, fileEnd)
			}
			add(Region{Start: fileEnd, End: memEnd, Kind: RegionBss, Prot: s.prot})
		}
		cur = memEnd
	}
	l.Regions = append(l.Regions, regions...)
	return bias, extra, nil
}

// mapStack maps the stack between two guards and writes the initial
// stack into it.
func (l *Loaded) mapStack(in *stackInput, execStack bool, pg uint64) error {
	total := uintptr(stackGuard + in.size + pg)
	lo, err := mmap(0, total, unix.PROT_NONE, reserveFlags, -1, 0)
	if err != nil {
		return sysError(err, "cannot reserve a stack of %d bytes", in.size)
	}
	l.addSpan(lo, lo+total)
	prot := unix.PROT_READ | unix.PROT_WRITE
	if execStack {
		prot |= unix.PROT_EXEC
	}
	base, top := lo+stackGuard, lo+stackGuard+uintptr(in.size)
	if _, err := mmap(base, top-base, prot, reserveFlags|unix.MAP_FIXED|unix.MAP_STACK, -1, 0); err != nil {
		return sysError(err, "cannot map a stack of %d bytes", in.size)
	}
	st, err := buildStack(uint64(top), in)
	if err != nil {
		return err
	}
	copy(mem(uintptr(st.sp), len(st.img)), st.img)
	l.SP = uintptr(st.sp)
	l.Args = st.args
	l.ExecStack = execStack
	for _, e := range st.aux {
		l.Auxv = append(l.Auxv, [2]uint64{e.typ, e.val})
	}
	l.Regions = append(l.Regions,
		Region{Start: lo, End: base, Kind: RegionGuard, Prot: unix.PROT_NONE},
		Region{Start: base, End: top, Kind: RegionStack, Prot: prot},
		Region{Start: top, End: lo + total, Kind: RegionGuard, Prot: unix.PROT_NONE})
	return nil
}

func sortRegions(r []Region) {
	slices.SortFunc(r, func(a, b Region) int { return cmp.Compare(a.Start, b.Start) })
}
