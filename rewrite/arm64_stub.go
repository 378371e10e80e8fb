package rewrite

import "fmt"

// The stub frame: what a per-site stub stores on the guest's stack before
// it calls the dispatch entry with X0 pointing at it. The entry reads the
// call (X8, X0..X5) and any register it needs, writes the result into
// X[0], may change any other saved register, and returns 0 (served: the
// stub restores the frame and goes back to the site) or not 0 (replay:
// the stub restores the frame and runs the site's own `svc #0`, so the
// call traps as if the site had never been patched).
const (
	Arm64FrameX    = 0   // X0..X30, 8 bytes each
	Arm64FrameNZCV = 248 // condition flags (MRS NZCV)
	Arm64FrameFPSR = 256
	Arm64FrameFPCR = 264
	Arm64FrameQ    = 272 // Q0..Q31, 16 bytes each
	Arm64FramePC   = 784 // the site's return address (site + 4)
	Arm64FrameSP   = 792 // the guest's SP at the site
	Arm64FrameSize = 800 // a multiple of 16: SP stays aligned
)

// Arm64StubPush is the number of bytes pushed below the guest's SP before
// the frame: X16 and X17, saved by the stub's first instruction or by the
// veneer.
const Arm64StubPush = 16

// Arm64StubSlot is the room one stub takes in a pool (its size rounded up).
const Arm64StubSlot = 512

// Arm64StubEntryFar is the offset into a stub where a veneer enters it:
// the veneer has already pushed X16 and X17.
const Arm64StubEntryFar = 4

// Arm64Stub says where a stub goes and what it calls.
type Arm64Stub struct {
	Site  uint64 // address of the patched `svc #0`
	Addr  uint64 // where the stub is placed
	Entry uint64 // the dispatch entry, an AAPCS64 function of one argument
	// Return is 0 when the stub is in B reach of Site+4 (it returns with
	// a B); otherwise the address of the site's return veneer, which the
	// stub reaches through X16 after pushing X16 and X17 again.
	Return uint64
}

// arm64Asm is a tiny assembler: words placed from a base address, with
// 64-bit literals appended at the end and fixed up.
type arm64Asm struct {
	base  uint64
	words []uint32
	lits  []arm64Lit
	err   error
}

type arm64Lit struct {
	at    int // word index of the LDR
	reg   int
	value uint64
}

func (a *arm64Asm) pc() uint64 { return a.base + uint64(len(a.words))*4 }

func (a *arm64Asm) emit(ws ...uint32) { a.words = append(a.words, ws...) }

// ldrLit emits `LDR Xt, =value` (its literal is placed by finish).
func (a *arm64Asm) ldrLit(t int, value uint64) {
	a.lits = append(a.lits, arm64Lit{at: len(a.words), reg: t, value: value})
	a.emit(0)
}

// b emits `B to`.
func (a *arm64Asm) b(to uint64) {
	w, err := Arm64B(a.pc(), to)
	if err != nil && a.err == nil {
		a.err = err
	}
	a.emit(w)
}

// finish places the literals, 8-byte aligned, after the code.
func (a *arm64Asm) finish() ([]uint32, error) {
	if a.err != nil {
		return nil, a.err
	}
	if len(a.lits) > 0 && a.pc()%8 != 0 {
		a.emit(arm64BRK(0))
	}
	for _, l := range a.lits {
		lit := a.pc()
		w, err := arm64LDRLit(l.reg, a.base+uint64(l.at)*4, lit)
		if err != nil {
			return nil, err
		}
		a.words[l.at] = w
		a.emit(uint32(l.value), uint32(l.value>>32))
	}
	return a.words, nil
}

// Arm64StubCode returns the stub's instructions (and literals), to be
// placed at s.Addr. A direct B from the site enters at the first word; a
// veneer enters at Arm64StubEntryFar.
//
// What it keeps: everything `svc #0` keeps on Linux, that is every
// register but X0 (X1..X30, SP, NZCV, FPSR, FPCR, Q0..Q31), whatever the
// entry does, since the entry is an ordinary AAPCS64 function that may
// clobber the caller-saved ones. X16 and X17 included: they are saved
// before anything uses them and restored last (see docs/rewrite-arm64.md).
func Arm64StubCode(s Arm64Stub) ([]uint32, error) {
	if s.Site%4 != 0 || s.Addr%8 != 0 || s.Return%4 != 0 {
		return nil, fmt.Errorf("%w: stub at %#x for site %#x", ErrArm64Align, s.Addr, s.Site)
	}
	if s.Entry == 0 {
		return nil, fmt.Errorf("rewrite/arm64: stub for site %#x has no entry", s.Site)
	}
	ret := s.Site + 4
	if s.Return == 0 && !Arm64BReaches(s.Addr+Arm64StubSlot-4, ret) {
		return nil, fmt.Errorf("%w: stub at %#x cannot branch back to %#x and has no return veneer", ErrArm64Range, s.Addr, ret)
	}
	a := &arm64Asm{base: s.Addr}
	const sp, x16, x17 = arm64SP, arm64X16, arm64X17
	const frame = Arm64FrameSize
	// Entry: push X16, X17 (a veneer has done it and enters below).
	a.emit(arm64Pair(false, false, arm64Pre, x16, x17, sp, -Arm64StubPush))
	a.emit(arm64AddSubImm(true, sp, sp, frame))
	// X0..X15, X18..X29 in pairs, X30 alone.
	for r := 0; r < 30; r += 2 {
		if r == 16 {
			continue
		}
		a.emit(arm64Pair(false, false, arm64Offset, r, r+1, sp, Arm64FrameX+8*r))
	}
	a.emit(arm64LdrStrX(false, arm64X30, sp, Arm64FrameX+8*30))
	// The guest's X16 and X17 from the push into the frame.
	a.emit(arm64LdrStrX(true, x16, sp, frame))
	a.emit(arm64LdrStrX(true, x17, sp, frame+8))
	a.emit(arm64Pair(false, false, arm64Offset, x16, x17, sp, Arm64FrameX+8*16))
	// Flags and FP control/status.
	a.emit(arm64MRS(x16, arm64NZCV))
	a.emit(arm64LdrStrX(false, x16, sp, Arm64FrameNZCV))
	a.emit(arm64MRS(x16, arm64FPSR))
	a.emit(arm64MRS(x17, arm64FPCR))
	a.emit(arm64Pair(false, false, arm64Offset, x16, x17, sp, Arm64FrameFPSR))
	for q := 0; q < 32; q += 2 {
		a.emit(arm64Pair(false, true, arm64Offset, q, q+1, sp, Arm64FrameQ+16*q))
	}
	// The return address and the guest's SP, for the entry.
	a.ldrLit(x16, ret)
	a.emit(arm64LdrStrX(false, x16, sp, Arm64FramePC))
	a.emit(arm64AddSubImm(false, x16, sp, frame+Arm64StubPush))
	a.emit(arm64LdrStrX(false, x16, sp, Arm64FrameSP))
	// entry(frame)
	a.emit(arm64AddSubImm(false, arm64X0, sp, 0))
	a.ldrLit(x16, s.Entry)
	a.emit(arm64BLR(x16))
	// The verdict stays in X17 (restored last) while the rest comes back.
	a.emit(arm64AddSubImm(false, x17, arm64X0, 0))
	for q := 0; q < 32; q += 2 {
		a.emit(arm64Pair(true, true, arm64Offset, q, q+1, sp, Arm64FrameQ+16*q))
	}
	a.emit(arm64LdrStrX(true, x16, sp, Arm64FrameFPSR))
	a.emit(arm64MSR(arm64FPSR, x16))
	a.emit(arm64LdrStrX(true, x16, sp, Arm64FrameFPCR))
	a.emit(arm64MSR(arm64FPCR, x16))
	a.emit(arm64LdrStrX(true, x16, sp, Arm64FrameNZCV))
	a.emit(arm64MSR(arm64NZCV, x16))
	for r := 0; r < 30; r += 2 {
		if r == 16 {
			continue
		}
		a.emit(arm64Pair(true, false, arm64Offset, r, r+1, sp, Arm64FrameX+8*r))
	}
	a.emit(arm64LdrStrX(true, arm64X30, sp, Arm64FrameX+8*30))
	cbnz := len(a.words)
	a.emit(0) // CBNZ X17, replay (fixed below)
	// Served: back to the site with the frame's X16, X17.
	a.emit(arm64Pair(true, false, arm64Offset, x16, x17, sp, Arm64FrameX+8*16))
	if s.Return == 0 {
		a.emit(arm64AddSubImm(false, sp, sp, frame+Arm64StubPush))
		a.b(ret)
	} else {
		// The return veneer pops X16, X17: leave them in the push slots.
		a.emit(arm64LdrStrX(false, x16, sp, frame))
		a.emit(arm64LdrStrX(false, x17, sp, frame+8))
		a.emit(arm64AddSubImm(false, sp, sp, frame))
		a.ldrLit(x16, s.Return)
		a.emit(arm64BR(x16))
	}
	// Replay: every register as at the site, then the site's own svc.
	replay := a.pc()
	w, err := arm64CBNZ(x17, s.Addr+uint64(cbnz)*4, replay)
	if err != nil {
		return nil, err
	}
	a.words[cbnz] = w
	a.emit(arm64Pair(true, false, arm64Offset, x16, x17, sp, Arm64FrameX+8*16))
	a.emit(arm64AddSubImm(false, sp, sp, frame+Arm64StubPush))
	a.emit(Arm64SVC0)
	if s.Return == 0 {
		a.b(ret)
	} else {
		// After the svc SP may be another stack (clone's child): push
		// there, as the veneer did on the way in.
		a.emit(arm64Pair(false, false, arm64Pre, x16, x17, sp, -Arm64StubPush))
		a.ldrLit(x16, s.Return)
		a.emit(arm64BR(x16))
	}
	words, err := a.finish()
	if err != nil {
		return nil, err
	}
	if len(words)*4 > Arm64StubSlot {
		return nil, fmt.Errorf("rewrite/arm64: stub is %d bytes, more than its slot", len(words)*4)
	}
	return words, nil
}

// Arm64VeneerSize is the size of one site's veneer pair.
const Arm64VeneerSize = 32

// Arm64VeneerReturn is the offset of the return veneer within a veneer.
const Arm64VeneerReturn = 24

// Arm64VeneerCode returns the veneer for a site whose stub is out of B
// reach, placed at v (32-byte aligned, in B reach of the site):
//
//	v+0:  stp x16, x17, [sp, #-16]!   ; the site's B lands here
//	v+4:  ldr x16, v+16
//	v+8:  br  x16                     ; to stub + Arm64StubEntryFar
//	v+12: brk #0                      ; never runs
//	v+16: .quad stub + Arm64StubEntryFar
//	v+24: ldp x16, x17, [sp], #16     ; the return veneer
//	v+28: b   site + 4
//
// X16 is used to reach the stub only after the guest's X16 and X17 are on
// the stack, and they are popped before the branch back: the guest never
// sees them changed.
func Arm64VeneerCode(site, v, stub uint64) ([]uint32, error) {
	if v%32 != 0 || site%4 != 0 || stub%8 != 0 {
		return nil, fmt.Errorf("%w: veneer at %#x for site %#x", ErrArm64Align, v, site)
	}
	if !Arm64BReaches(site, v) || !Arm64BReaches(v+28, site+4) {
		return nil, fmt.Errorf("%w: veneer at %#x for site %#x", ErrArm64Range, v, site)
	}
	ldr, err := arm64LDRLit(arm64X16, v+4, v+16)
	if err != nil {
		return nil, err
	}
	back, err := Arm64B(v+28, site+4)
	if err != nil {
		return nil, err
	}
	target := stub + Arm64StubEntryFar
	return []uint32{
		arm64Pair(false, false, arm64Pre, arm64X16, arm64X17, arm64SP, -Arm64StubPush),
		ldr,
		arm64BR(arm64X16),
		arm64BRK(0),
		uint32(target), uint32(target >> 32),
		arm64Pair(true, false, arm64Post, arm64X16, arm64X17, arm64SP, Arm64StubPush),
		back,
	}, nil
}
