package rewrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// movMovesSyscall is `mov $nr,%eax`, moves, `syscall`.
func movMovesSyscall(nr uint32, moves ...[]byte) []byte {
	b := []byte{0xB8}
	b = binary.LittleEndian.AppendUint32(b, nr)
	for _, m := range moves {
		b = append(b, m...)
	}
	return append(b, 0x0F, 0x05)
}

var (
	movRdxR10  = []byte{0x49, 0x89, 0xD2}                         // mov %rdx,%r10
	movRcxR10  = []byte{0x49, 0x89, 0xCA}                         // mov %rcx,%r10
	movRbpRdi  = []byte{0x48, 0x89, 0xEF}                         // mov %rbp,%rdi
	movR9Rdi   = []byte{0x4C, 0x89, 0xCF}                         // mov %r9,%rdi
	movEaxEdi  = []byte{0x89, 0xC7}                               // mov %eax,%edi
	movslqR8   = []byte{0x49, 0x63, 0xF8}                         // movslq %r8d,%rdi
	movImmR10d = []byte{0x41, 0xBA, 8, 0, 0, 0}                   // mov $8,%r10d
	movImmRdx  = []byte{0x48, 0xC7, 0xC2, 0xFF, 0xFF, 0xFF, 0xFF} // mov $-1,%rdx
	movRdiRax  = []byte{0x48, 0x89, 0xF8}                         // mov %rdi,%rax: the number, refused
	movRspRdi  = []byte{0x48, 0x89, 0xE7}                         // mov %rsp,%rdi: reads rsp, fine
	movRdiRsp  = []byte{0x48, 0x89, 0xFC}                         // mov %rdi,%rsp: refused
	movMemRdi  = []byte{0x48, 0x8B, 0x3F}                         // mov (%rdi),%rdi: memory, refused
	leaRip     = []byte{0x48, 0x8D, 0x3D, 0, 0, 0, 0}             // lea 0(%rip),%rdi: refused
	xorEdx     = []byte{0x31, 0xD2}                               // xor %edx,%edx: flags, refused
)

// TestX86FindSite: extended sites (moves between the mov and the
// syscall) are found with their moves, plain ones as X86Site finds them,
// and anything else between the two is refused.
func TestX86FindSite(t *testing.T) {
	cases := []struct {
		name  string
		moves [][]byte
		ok    bool
	}{
		{"plain", nil, true},
		{"mov %rdx,%r10", [][]byte{movRdxR10}, true},
		{"mov %rcx,%r10", [][]byte{movRcxR10}, true},
		{"two moves (musl's stat)", [][]byte{movR9Rdi, movRdxR10}, true},
		{"32-bit move", [][]byte{movEaxEdi}, true},
		{"movslq", [][]byte{movslqR8}, true},
		{"immediates", [][]byte{movImmR10d, movImmRdx}, true},
		{"reads rsp", [][]byte{movRspRdi}, true},
		{"four moves", [][]byte{movRbpRdi, movRdxR10, movR9Rdi, movEaxEdi}, true},
		{"five moves", [][]byte{movRbpRdi, movRdxR10, movR9Rdi, movEaxEdi, movRcxR10}, false},
		{"writes rax", [][]byte{movRdiRax}, false},
		{"writes rsp", [][]byte{movRdiRsp}, false},
		{"memory operand", [][]byte{movMemRdi}, false},
		{"rip-relative lea", [][]byte{leaRip}, false},
		{"xor (flags)", [][]byte{xorEdx}, false},
		{"a move then xor", [][]byte{movRdxR10, xorEdx}, false},
	}
	for _, c := range cases {
		code := cat(nops, movMovesSyscall(102, c.moves...), ret)
		tx := &X86Text{Base: testBase, Code: code}
		ip := testBase + uint64(len(code)-1)
		si, err := X86FindSite(tx, ip, 102, false)
		if !c.ok {
			if err == nil {
				t.Errorf("%s: accepted % x", c.name, code)
			}
			continue
		}
		n := 7
		for _, m := range c.moves {
			n += len(m)
		}
		if err != nil || si.Site != testBase+uint64(len(nops)) || si.Len != n || len(si.Moves) != len(c.moves) {
			t.Errorf("%s: %+v, %v", c.name, si, err)
			continue
		}
		if _, err := X86FindSite(tx, ip, 103, false); !errors.Is(err, ErrNoMov) {
			t.Errorf("%s: another number: %v", c.name, err)
		}
	}
}

// A branch into the bytes the patch changes refuses an extended site; a
// branch to the syscall (bytes left as they are) does not.
func TestX86FindSiteBranches(t *testing.T) {
	site := movMovesSyscall(2, movRdxR10) // mov(5) move(3) syscall(2)
	into := cat(nops, []byte{0xEB, 0x05 + 0}, []byte{0x90, 0x90, 0x90, 0x90}, site, ret)
	// jmp +5 from after the 2-byte jmp lands on the fifth byte after it:
	// the 4 NOPs, then site+1.
	tx := &X86Text{Base: testBase, Code: into}
	if _, err := X86FindSite(tx, testBase+uint64(len(into)-1), 2, false); !errors.Is(err, ErrBranchInto) {
		t.Errorf("branch into site+1: %v", err)
	}
	toSyscall := cat(nops, []byte{0xEB, 0x0C}, []byte{0x90, 0x90, 0x90, 0x90}, site, ret) // lands at site+8
	tx = &X86Text{Base: testBase, Code: toSyscall}
	if _, err := X86FindSite(tx, testBase+uint64(len(toSyscall)-1), 2, false); err != nil {
		t.Errorf("branch to the syscall: %v", err)
	}
}

// Apply carries the moves out as the CPU would.
func TestX86MoveApply(t *testing.T) {
	cases := []struct {
		code []byte
		reg  int
		want uint64
	}{
		{movRdxR10, 10, 0x2222222222222222},
		{movEaxEdi, 7, 0x00000000ABCDEF00},
		{movslqR8, 7, 0xFFFFFFFF88888888},
		{movImmR10d, 10, 8},
		{movImmRdx, 2, 0xFFFFFFFFFFFFFFFF},
		{movRspRdi, 7, 0x7FFF0000},
	}
	for _, c := range cases {
		m, ok := decodeMove(c.code)
		if !ok || len(m.Bytes) != len(c.code) {
			t.Errorf("% x: not decoded", c.code)
			continue
		}
		regs := [16]uint64{0xFFFFFFFFABCDEF00, 0x1111, 0x2222222222222222, 3, 0x7FFF0000, 5, 6, 0x7777777777777777, 0x1234567888888888}
		m.Apply(func(r int) uint64 { return regs[r] }, func(r int, v uint64) { regs[r] = v })
		if regs[c.reg] != c.want {
			t.Errorf("% x: reg %d = %#x, want %#x", c.code, c.reg, regs[c.reg], c.want)
		}
		// x86asm agrees it is one mov of registers or an immediate.
		in, err := decode(c.code)
		if err != nil || in.Len != len(c.code) || (in.Op != x86asm.MOV && in.Op != x86asm.MOVSXD) {
			t.Errorf("% x: x86asm %v %v", c.code, in, err)
		}
	}
}

// The stub of an extended site runs the mov, the moves, then the stub's
// own code, and fits X86StubSize with the most moves allowed.
func TestX86StubFor(t *testing.T) {
	moves, _ := decodeMoves(cat(movImmRdx, movImmRdx, movImmRdx, movRdxR10))
	if n := len(cat(movImmRdx, movImmRdx, movImmRdx, movRdxR10)); n > X86MaxMoveBytes {
		t.Fatalf("test moves %d bytes", n)
	}
	for _, code := range [][]byte{X86StubCall(2, 0x1234, 0x5678), X86StubConst(7, 0x1234), X86StubGS32(228, 0x1234)} {
		s := X86StubFor(2, moves, code)
		if len(s) > X86StubSize || !bytes.HasSuffix(s, code) || s[0] != 0xB8 {
			t.Errorf("stub %d bytes: % x", len(s), s)
		}
		n := 0
		for i := 0; i < len(s)-len(code); n++ {
			in, err := decode(s[i:])
			if err != nil || in.Op != x86asm.MOV && in.Op != x86asm.MOVSXD {
				t.Fatalf("stub at %d: %v %v", i, in, err)
			}
			i += in.Len
		}
		if n != 1+len(moves) {
			t.Errorf("%d instructions before the stub's code, want %d", n, 1+len(moves))
		}
	}
}

// patchDisturbs reports whether patching the 7 bytes at off would change
// an instruction of the decoding at (other than those at off and off+5)
// or a direct branch's target there (off+1 ... off+6, or off-1 when that
// byte could be the mov's prefix).
func patchDisturbs(code []byte, at map[int]x86asm.Inst, off int) bool {
	for a, in := range at {
		if tgt, ok := directTarget(in, uint64(a)); ok && (tgt > uint64(off) && tgt < uint64(off)+7 || prefixBefore(code, off) && tgt == uint64(off)-1) {
			return true
		}
		if a < off+7 && a+in.Len > off && a != off && a != off+5 {
			return true
		}
	}
	return false
}

// oracleExt decodes code linearly from the scanner's window (as oracle)
// and reports whether an extended site si is real there: the mov at its
// start with nr, then moves only, then the syscall ending at site+Len, no
// direct branch into site+1 ... site+6, and no instruction of that
// decoding overlapping the patched bytes but the mov and the first move.
func oracleExt(code []byte, base uint64, si X86SiteInfo, nr uint32) bool {
	off := int(si.Site - base)
	at := decodeFrom(code, window(off))
	if patchDisturbs(code, at, off) {
		return false
	}
	mov, ok := at[off]
	if !ok || mov.Op != x86asm.MOV || mov.Len != 5 {
		return false
	}
	if r, _ := mov.Args[0].(x86asm.Reg); r != x86asm.EAX {
		return false
	}
	if imm, _ := mov.Args[1].(x86asm.Imm); uint32(imm) != nr {
		return false
	}
	i := off + 5
	for _, m := range si.Moves {
		in, ok := at[i]
		if !ok || in.Len != len(m.Bytes) || in.Op != x86asm.MOV && in.Op != x86asm.MOVSXD {
			return false
		}
		i += in.Len
	}
	sc, ok := at[i]
	return ok && sc.Op == x86asm.SYSCALL && i+2 == off+si.Len
}

// checkFind runs X86FindSite on every syscall pair of code with every
// number a `B8` byte before it could give, and checks what it accepts
// against oracleExt: an accepted site is real, and its patch changes no
// instruction but its own.
func checkFind(t *testing.T, code []byte, base uint64) {
	for e := 0; e+2 <= len(code); e++ {
		if code[e] != 0x0F || code[e+1] != 0x05 {
			continue
		}
		for d := 0; d <= X86MaxMoveBytes; d++ {
			off := e - d - 5
			if off < 0 || code[off] != 0xB8 {
				continue
			}
			nr := binary.LittleEndian.Uint32(code[off+1:])
			tx := &X86Text{Base: base, Code: code}
			si, err := X86FindSite(tx, base+uint64(e+2), nr, false)
			if err != nil {
				continue
			}
			if !oracleExt(code, base, si, nr) {
				t.Fatalf("accepted a site at %#x (len %d, %d moves) the linear decoding does not have: % x", si.Site, si.Len, len(si.Moves), code)
			}
		}
	}
}

// FuzzSiteX86Moves: extended sites, from streams of moves, pairs and
// instructions that hide 0F 05 or B8 inside them.
func FuzzSiteX86Moves(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5})
	f.Add([]byte{6, 0, 7, 2, 8, 9, 10, 5})
	parts := append([][]byte{
		{0xB8, 0x04, 0, 0, 0}, movRdxR10, movR9Rdi, {0x0F, 0x05}, movEaxEdi, {0xC3},
		{0xB8, 0x02, 0, 0, 0}, movMemRdi, xorEdx, movImmR10d, movslqR8,
		{0x48, 0xB8, 0xB8, 2, 0, 0, 0, 0x49, 0x89, 0xD2}, // movabs hiding a site's start
		{0xEB, 0x03}, {0x75, 0xF6},
		{0x89, 0xF2}, {0x41}, {0xEB, 0x01}, {0x75, 0xF4}, // prefix-like last bytes, branches to them
	}, embedded...)
	f.Fuzz(func(t *testing.T, pick []byte) {
		if code, ok := fromParts(pick, parts, 256); ok {
			checkFind(t, code, 0x9000)
		}
	})
}
