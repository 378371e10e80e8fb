// Package rewrite is the rewrite tier's code patching: it decides which
// syscall sites of guest code may be patched, encodes the patch and the
// per-site stubs, and keeps the table of patched sites (docs/tiers.md,
// Rewrite tier). It is pure Go: the trap tier (package trap) supplies the
// memory, the entry into kbox and the signal handling.
//
// Files named x86* are the x86_64 patcher; arm64* files are the aarch64
// one.
package rewrite

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"golang.org/x/arch/x86/x86asm"
)

// X86SiteLen is the length of a patched x86_64 site: `mov $imm32,%eax`
// (B8 imm32) then `syscall` (0F 05), replaced by `jmp *disp32`
// (FF 24 25 disp32), an absolute jump through a pointer in the slot table.
const X86SiteLen = 7

// Reasons a site is refused. A refused site keeps trapping.
var (
	ErrNotSyscall = errors.New("no syscall instruction before the trapping address")
	ErrNoMov      = errors.New("the syscall is not preceded by mov $nr,%eax with the trapped number")
	ErrEndbr      = errors.New("the mov follows endbr64 (an indirect-branch target)")
	ErrBoundary   = errors.New("the mov is not an instruction boundary in every decoding of the code before it")
	ErrBranchInto = errors.New("a direct branch targets the middle of the site")
	ErrOutOfText  = errors.New("the site is not inside the text given")
	ErrCacheLine  = errors.New("the syscall's two bytes straddle a cache line")
)

// sweepBack is how far before a site linear decodings start; sweepFwd how
// far after it they go to find backward branches. rel8 branches reach
// 128 bytes: both cover them with room to spare; rel32 branches are found
// by X86Text's scan of the whole text.
const (
	sweepBack = 1024
	sweepFwd  = 256
)

// X86Text is one mapped text range of guest code with what the site
// finder learns of it once: every rel32 direct branch target in the text
// found at any byte offset of it (E8 call, E9 jmp, 0F 80-8F jcc), a bit
// per byte. Counting every offset, not only decoded instruction starts,
// is conservative: a byte sequence that only looks like a branch may
// refuse a site, never admit one.
type X86Text struct {
	Base uint64 // address of Code[0]
	Code []byte
	// Src, when set, holds the bytes of Code (the file Code maps): the
	// scan reads them from it, a first touch of every page of a mapping
	// costing more than a copy (a PVM guest: 3.7 ms for 3 MB, against 0.3
	// by pread). A read that fails is scanned from Code.
	Src     io.ReaderAt
	targets []uint64 // bit i: a rel32 branch targets Code[i]
	once    sync.Once
}

// Scan finds the text's rel32 targets, once; safe from several
// goroutines at a time, and while other sites of the text are patched:
// a patch changes only a site's bytes, where no real branch lies, so the
// bytes it writes can add a target that is not one (a refusal), never
// hide one. The site checks scan on first use.
func (t *X86Text) Scan() { t.once.Do(t.scan) }

// rel32Into reports whether some rel32 target lies in (lo, hi).
func (t *X86Text) rel32Into(lo, hi uint64) bool {
	t.Scan()
	for a := lo + 1; a < hi; a++ {
		if a < t.Base {
			continue
		}
		off := a - t.Base
		if off >= uint64(len(t.Code)) {
			break
		}
		if t.targets[off>>6]&(1<<(off&63)) != 0 {
			return true
		}
	}
	return false
}

// isPrefix: legacy prefixes, REX, and the first bytes of VEX, EVEX and
// XOP, which would make the bytes at the site part of another instruction
// (REX.B B8 is mov to %r8d).
func isPrefix(b byte) bool {
	switch b {
	case 0x66, 0x67, 0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0x62, 0xC4, 0xC5, 0x8F:
		return true
	}
	return b >= 0x40 && b <= 0x4F
}

// X86Site checks the site of a syscall that trapped with number nr,
// the kernel reporting ip (the address after the `syscall`). It returns
// the site's address (ip-7, where the mov starts) when the 7 bytes there
// may be replaced by a jump, or why not. The checks (docs/tiers.md):
//   - ip-2 holds 0F 05 and ip-7 holds B8 with imm32 == nr;
//   - no endbr64 right before the mov, and no direct branch to a byte
//     there that would be the mov's prefix (checkSite);
//   - every linear decoding started at several points up to sweepBack
//     bytes before the site has instruction boundaries at the mov and at
//     the syscall (x86 decoding resynchronises within a few instructions:
//     a site inside a longer instruction in any of them is refused);
//   - no direct branch decoded near the site (rel8 or rel32), and no rel32
//     branch anywhere in the text, targets site+1 ... site+6;
//   - the syscall's two bytes lie in one cache line, so that replacing
//     them is one atomic store (the patch protocol, docs/tiers.md).
func X86Site(t *X86Text, ip uint64, nr uint32) (uint64, error) {
	if ip < t.Base+X86SiteLen || ip > t.Base+uint64(len(t.Code)) {
		return 0, ErrOutOfText
	}
	site := ip - X86SiteLen
	off := int(site - t.Base)
	c := t.Code
	if c[off+5] != 0x0F || c[off+6] != 0x05 {
		return 0, ErrNotSyscall
	}
	if c[off] != 0xB8 || binary.LittleEndian.Uint32(c[off+1:]) != nr {
		return 0, ErrNoMov
	}
	if err := checkSite(t, off, X86SiteLen); err != nil {
		return 0, err
	}
	return site, nil
}

// X86SiteInfo is a site X86FindSite accepted: the mov at Site, Len bytes
// through the syscall, and the moves between them (extended sites,
// x86moves.go). A Dynamic site's number is in %rax already: Lead is the
// 5-byte instruction at Site, which the stub carries out (x86dyn.go).
type X86SiteInfo struct {
	Site    uint64
	Len     int
	Moves   []X86Move
	Dynamic bool
	Lead    []byte
}

// X86FindSite is X86Site that also accepts extended sites: `mov $nr,%eax`,
// up to X86MaxMoves displaceable moves, `syscall`; and, with dynamic,
// sites whose number is in a register (x86dyn.go). The checks on the mov
// are X86Site's; the branch checks cover the bytes the patch changes
// (site+1 ... site+6), the bytes after them being left as they are.
func X86FindSite(t *X86Text, ip uint64, nr uint32, dynamic bool) (X86SiteInfo, error) {
	site, err := X86Site(t, ip, nr)
	if !errors.Is(err, ErrNoMov) {
		return X86SiteInfo{Site: site, Len: X86SiteLen}, err
	}
	end := int(ip-t.Base) - 2 // the syscall (X86Site checked it)
	c := t.Code
	for d := 2; d <= X86MaxMoveBytes; d++ {
		off := end - d - 5
		if off < 0 {
			break
		}
		if c[off] != 0xB8 || binary.LittleEndian.Uint32(c[off+1:]) != nr {
			continue
		}
		moves, ok := decodeMoves(c[off+5 : end])
		if !ok {
			continue
		}
		if err := checkSite(t, off, 5+d+2); err != nil {
			return X86SiteInfo{}, err
		}
		return X86SiteInfo{Site: t.Base + uint64(off), Len: 5 + d + 2, Moves: moves}, nil
	}
	if dynamic {
		return findDynamic(t, end)
	}
	return X86SiteInfo{}, ErrNoMov
}

// checkSite makes the checks on the mov at off of a site n bytes long.
func checkSite(t *X86Text, off, n int) error {
	c := t.Code
	site := t.Base + uint64(off)
	if (site+5)%64 == 63 {
		return ErrCacheLine
	}
	if off >= 4 && c[off-4] == 0xF3 && c[off-3] == 0x0F && c[off-2] == 0x1E && c[off-1] == 0xFA {
		return ErrEndbr
	}
	// A byte before the mov that could be a prefix (REX, 66, F2...) is the
	// end of the instruction before it: every sweep below finds the mov
	// a boundary. Only a branch to that byte would run it as the mov's
	// prefix (the patched bytes would then mean another instruction), so
	// such a site counts site-1 as its inside for the branch checks.
	pre := off >= 1 && isPrefix(c[off-1])
	lo := off - sweepBack
	if lo < 0 {
		lo = 0
	}
	// Linear sweeps from several starts: the text's start when it is
	// near, and points at decreasing distances.
	starts := []int{lo}
	for _, d := range []int{sweepBack / 2, 256, 128, 64, 32, 16} {
		if s := off - d; s > lo {
			starts = append(starts, s)
		}
	}
	// The first sweep, the longest, is the reference: its boundaries tell
	// the others' undecodable bytes near the site (below) apart.
	ref := make([]bool, off-lo+1)
	for k, s := range starts {
		r := ref
		if k == 0 {
			r = nil
		}
		if err := sweepTo(t, s, off, pre, r, ref, lo); err != nil {
			return err
		}
	}
	// Forward from the end of the site (a boundary: the syscall is real),
	// for branches back into it.
	hi := off + n + sweepFwd
	if hi > len(c) {
		hi = len(c)
	}
	if branchInto(t, off+n, hi, off, pre) {
		return ErrBranchInto
	}
	if t.rel32Into(site, site+X86SiteLen) || pre && t.rel32Into(site-2, site) {
		return ErrBranchInto
	}
	return nil
}

// sweepTo decodes linearly from offset s to the site (offset site): the
// site must be an instruction boundary of that decoding (ErrBoundary) and
// no branch decoded on the way may target the site's inside
// (ErrBranchInto). An undecodable byte is stepped over (data in text):
// the decoding after it still counts. Within 15 bytes of the site it
// refuses the site (x86asm does not know EVEX, for one, and such an
// instruction may hold the mov), unless ref, the reference sweep's
// boundaries (offsets from base), says the byte is inside one of its
// instructions: then this sweep started out of step with it, and ends
// there. The reference sweep (ref nil) marks its boundaries in mark.
// Another sweep that reaches one of them has fallen into step with the
// reference, which decoded the rest to the site: it ends there.
func sweepTo(t *X86Text, s, site int, pre bool, ref, mark []bool, base int) error {
	c := t.Code
	i := s
	for i < site {
		if ref == nil {
			mark[i-base] = true
		} else if ref[i-base] {
			return nil
		}
		n, tgt, err := decodeAt(c[i:], t.Base+uint64(i))
		if err != nil {
			if site-i <= 15 {
				if ref != nil && !ref[i-base] {
					return nil
				}
				return ErrBoundary
			}
			i++
			continue
		}
		if into(tgt, t.Base+uint64(site), pre) {
			return ErrBranchInto
		}
		i += n
	}
	if i != site {
		return ErrBoundary
	}
	return nil
}

// branchInto decodes linearly from offset s to end and reports whether a
// direct branch there targets the inside of the site at offset site (with
// pre, the byte before it too).
func branchInto(t *X86Text, s, end, site int, pre bool) bool {
	c := t.Code
	for i := s; i < end; {
		n, tgt, err := decodeAt(c[i:end], t.Base+uint64(i))
		if err != nil {
			i++
			continue
		}
		if into(tgt, t.Base+uint64(site), pre) {
			return true
		}
		i += n
	}
	return false
}

// decode decodes one instruction, x86asm's way, but for endbr64 and
// endbr32 (F3 0F 1E FA/FB: CET's marks, a 4-byte NOP on every CPU), which
// x86asm does not know.
func decode(b []byte) (inst x86asm.Inst, err error) {
	defer func() {
		// x86asm v0.28 panics on some truncated AVX encodings (index out
		// of range in decodeAVX, found by FuzzSiteX86): not an
		// instruction.
		if recover() != nil {
			inst, err = x86asm.Inst{}, errors.New("undecodable")
		}
	}()
	if len(b) >= 4 && b[0] == 0xF3 && b[1] == 0x0F && b[2] == 0x1E && (b[3] == 0xFA || b[3] == 0xFB) {
		return x86asm.Inst{Op: x86asm.NOP, Len: 4}, nil
	}
	inst, err = x86asm.Decode(b, 64)
	if err == nil && inst.Op == 0 {
		// What x86asm returns for an instruction cut short by the end
		// of b: not an instruction.
		err = errors.New("truncated instruction")
	}
	return inst, err
}

// decodeAt decodes the instruction at the start of b, at addr: its
// length, and the target of a direct branch (0 for any other), by
// fastLen where it knows the instruction, else by x86asm (decode).
func decodeAt(b []byte, addr uint64) (n int, tgt uint64, err error) {
	if n, br, rel, ok := fastLen(b); ok {
		if br {
			tgt = uint64(int64(addr) + int64(n) + rel)
		}
		return n, tgt, nil
	}
	inst, err := decode(b)
	if err != nil || inst.Len == 0 {
		return 0, 0, errUndecodable
	}
	tgt, _ = directTarget(inst, addr)
	return inst.Len, tgt, nil
}

var errUndecodable = errors.New("undecodable")

// into reports whether a direct branch to tgt (0: none) lands on site+1
// ... site+6, or with pre on site-1.
func into(tgt, site uint64, pre bool) bool {
	return tgt != 0 && (tgt > site && tgt < site+X86SiteLen || pre && tgt == site-1)
}

// directTarget is the target of a direct branch (jmp, jcc, call, loop,
// jrcxz with a relative operand) at addr.
func directTarget(inst x86asm.Inst, addr uint64) (uint64, bool) {
	switch inst.Op {
	case x86asm.JMP, x86asm.CALL, x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE,
		x86asm.JE, x86asm.JNE, x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE,
		x86asm.JO, x86asm.JNO, x86asm.JP, x86asm.JNP, x86asm.JS, x86asm.JNS,
		x86asm.JCXZ, x86asm.JECXZ, x86asm.JRCXZ, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
	default:
		return 0, false
	}
	rel, ok := inst.Args[0].(x86asm.Rel)
	if !ok {
		return 0, false
	}
	return uint64(int64(addr) + int64(inst.Len) + int64(rel)), true
}
