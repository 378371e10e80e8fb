package rewrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

const testBase = 0x555555554000

func movSyscall(nr uint32) []byte {
	b := []byte{0xB8}
	b = binary.LittleEndian.AppendUint32(b, nr)
	return append(b, 0x0F, 0x05)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var (
	pushRbp = []byte{0x55}
	movRsp  = []byte{0x48, 0x89, 0xE5} // mov %rsp,%rbp
	ret     = []byte{0xC3}
	nops    = bytes.Repeat([]byte{0x90}, 16)
)

func TestX86Site(t *testing.T) {
	plain := cat(nops, pushRbp, movRsp, movSyscall(39), ret)
	site := uint64(len(nops) + 4)
	cases := []struct {
		name string
		code []byte
		ip   uint64 // offset of the address after the syscall
		nr   uint32
		want error
	}{
		{"getpid wrapper", plain, site + 7, 39, nil},
		{"wrong number", plain, site + 7, 40, ErrNoMov},
		{"not a syscall", plain, site + 6, 39, ErrNotSyscall},
		{"outside", plain, 3, 39, ErrOutOfText},
		{"endbr64 before", cat(nops, []byte{0xF3, 0x0F, 0x1E, 0xFA}, movSyscall(39), ret), uint64(len(nops) + 4 + 7), 39, ErrEndbr},
		{"REX.B: mov to r8d", cat(nops, []byte{0x41}, movSyscall(39), ret), uint64(len(nops) + 1 + 7), 39, ErrBoundary},
		// mov %esi,%edx (89 F2): F2 is its ModRM, and a REPNE prefix
		// only to a branch that lands on it.
		{"a prefix-like last byte before", cat(nops, []byte{0x89, 0xF2}, movSyscall(39), ret), uint64(len(nops) + 2 + 7), 39, nil},
		{"a branch to that byte", cat(nops, []byte{0xEB, 0x01, 0x89, 0xF2}, movSyscall(39), ret), uint64(len(nops) + 4 + 7), 39, ErrBranchInto},
		{"a branch back to that byte", cat(nops, []byte{0x89, 0xF2}, movSyscall(39), []byte{0x75, 0xF6}, ret), uint64(len(nops) + 2 + 7), 39, ErrBranchInto},
		// 8B B8 disp32: mov disp32(%rax),%edi swallows the B8 and its
		// four bytes: the mov is no instruction.
		{"inside mov disp32", cat(nops, []byte{0x8B}, movSyscall(39), ret), uint64(len(nops) + 1 + 7), 39, ErrBoundary},
		// jne back to the syscall (rel8 after the site).
		{"branch back into", cat(nops, movSyscall(39), []byte{0x75, 0xFC}, ret), uint64(len(nops) + 7), 39, ErrBranchInto},
		// jmp rel8 forward to the syscall from before the site.
		{"branch forward into", cat(nops, []byte{0xEB, 0x05}, movSyscall(39), ret), uint64(len(nops) + 2 + 7), 39, ErrBranchInto},
		// A branch to the mov itself is fine.
		{"after endbr64 and a jmp", cat(nops, []byte{0xF3, 0x0F, 0x1E, 0xFA, 0xE9, 0, 0, 0, 0}, movSyscall(39), ret), uint64(len(nops) + 9 + 7), 39, nil},
		{"branch to the mov", cat(nops, []byte{0xEB, 0x00}, movSyscall(39), ret), uint64(len(nops) + 2 + 7), 39, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx := &X86Text{Base: testBase, Code: c.code}
			got, err := X86Site(tx, testBase+c.ip, c.nr)
			if !errors.Is(err, c.want) {
				t.Fatalf("X86Site: %v, want %v", err, c.want)
			}
			if err == nil && got != testBase+c.ip-7 {
				t.Fatalf("site %#x, want %#x", got, testBase+c.ip-7)
			}
		})
	}
}

func TestX86SiteRel32FarAway(t *testing.T) {
	// A call from 4 KiB away to the syscall inside the site (rel32).
	far := make([]byte, 4096)
	for i := range far {
		far[i] = 0x90
	}
	code := cat(far, movSyscall(0), ret)
	site := len(far)
	rel := int32(site+5) - 5 // call at offset 0, ends at 5
	copy(code, append([]byte{0xE8}, binary.LittleEndian.AppendUint32(nil, uint32(rel))...))
	tx := &X86Text{Base: testBase, Code: code}
	if _, err := X86Site(tx, testBase+uint64(site+7), 0); !errors.Is(err, ErrBranchInto) {
		t.Fatalf("X86Site: %v, want ErrBranchInto", err)
	}
}

func TestX86SiteCacheLine(t *testing.T) {
	// syscall's 0F at offset 63 of a line: the two bytes straddle it.
	code := cat(bytes.Repeat([]byte{0x90}, 58), movSyscall(1), ret)
	tx := &X86Text{Base: 0x400000, Code: code}
	if _, err := X86Site(tx, 0x400000+58+7, 1); !errors.Is(err, ErrCacheLine) {
		t.Fatalf("X86Site: %v, want ErrCacheLine", err)
	}
}

func TestX86Encodings(t *testing.T) {
	j := X86Jump(X86SlotAddr(5))
	inst, err := x86asm.Decode(j[:], 64)
	if err != nil || inst.Op != x86asm.JMP || inst.Len != 7 {
		t.Fatalf("jump decodes as %v (%v)", inst, err)
	}
	m, ok := inst.Args[0].(x86asm.Mem)
	if !ok || m.Base != 0 || m.Index != 0 || uint32(m.Disp) != X86SlotAddr(5) {
		t.Fatalf("jump operand %#v", inst.Args[0])
	}
	// The syscall's bytes of a patched site (site+5) are an invalid opcode,
	// and so are 0F with the new byte at site+6 (a torn view).
	if _, err := x86asm.Decode(j[5:], 64); err == nil {
		t.Errorf("site+5 of a patch decodes")
	}
	for _, c := range []struct {
		name string
		code []byte
		want []x86asm.Op
	}{
		{"call", X86StubCall(39, 0x1234, 0x5678), []x86asm.Op{x86asm.MOV, x86asm.MOV, x86asm.JMP}},
		{"const", X86StubConst(7, 0x1234), []x86asm.Op{x86asm.MOV, x86asm.JMP}},
		{"gs", X86StubGS32(228, 0x1234), []x86asm.Op{x86asm.MOV, x86asm.JMP}},
	} {
		if len(c.code) > X86StubSize {
			t.Errorf("%s stub is %d bytes", c.name, len(c.code))
		}
		var ops []x86asm.Op
		for i := 0; i < len(c.code); {
			in, err := x86asm.Decode(c.code[i:], 64)
			if err != nil {
				t.Fatalf("%s: %v at %d", c.name, err, i)
			}
			ops = append(ops, in.Op)
			i += in.Len
			if in.Op == x86asm.JMP {
				break
			}
		}
		if len(ops) != len(c.want) {
			t.Fatalf("%s: %v", c.name, ops)
		}
		for i := range ops {
			if ops[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, ops, c.want)
			}
		}
	}
}

// fakeMem records the patcher's stores.
type fakeMem struct {
	code  []byte
	base  uint64
	log   []string
	slots map[int]uint64
}

func (m *fakeMem) Code(addr uint64, n int) []byte {
	if addr < m.base || addr+uint64(n) > m.base+uint64(len(m.code)) {
		return nil
	}
	return m.code[addr-m.base:]
}
func (m *fakeMem) Store1(b []byte, i int, v byte) { b[i] = v; m.log = append(m.log, "1") }
func (m *fakeMem) Store2(b []byte, i int, v [2]byte) {
	b[i], b[i+1] = v[0], v[1]
	m.log = append(m.log, "2")
}
func (m *fakeMem) Sync()                   { m.log = append(m.log, "S") }
func (m *fakeMem) SetSlot(i int, p uint64) { m.slots[i] = p }
func (m *fakeMem) SetStub(i int, code []byte) uint64 {
	return 0x10000 + uint64(i*X86StubSize)
}

func TestX86PatchProtocol(t *testing.T) {
	code := cat(nops, movSyscall(39), ret)
	orig := append([]byte(nil), code...)
	m := &fakeMem{code: code, base: testBase, slots: map[int]uint64{}}
	p := &X86Patcher{Mem: m}
	site := uint64(testBase + len(nops))
	if _, err := p.Patch(site, 39, StubCall, func(int) []byte { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := string(bytesJoin(m.log)); got != "1S11112S1S" {
		t.Errorf("stores %s, want int3, sync, middle, sync, first byte, sync", got)
	}
	j := X86Jump(X86SlotAddr(0))
	if !bytes.Equal(code[len(nops):len(nops)+7], j[:]) || m.slots[0] != 0x10000 {
		t.Fatalf("patched bytes % x, slot %#x", code[len(nops):len(nops)+7], m.slots[0])
	}
	if _, err := p.Patch(site, 39, StubCall, func(int) []byte { return nil }); !errors.Is(err, ErrPatched) {
		t.Errorf("second patch: %v", err)
	}
	// A thread resuming at site+5 faults (SIGILL): served as the syscall.
	if s, k := p.Restart(site+5, true); s != site || k != AsSyscall {
		t.Errorf("Restart(site+5, SIGILL) = %#x %v", s, k)
	}
	// The int3 of the protocol, gone again: back to the site.
	if s, k := p.Restart(site+1, false); s != site || k != ToSite {
		t.Errorf("Restart(site+1, SIGTRAP) = %#x %v", s, k)
	}
	if _, k := p.Restart(site+3, false); k != NoRestart {
		t.Errorf("Restart elsewhere: %v", k)
	}
	if n := p.Forget(site, site+1, true); n != 1 || !bytes.Equal(code, orig) {
		t.Fatalf("Forget: %d, code % x", n, code)
	}
	if _, k := p.Restart(site+5, true); k != NoRestart {
		t.Errorf("Restart after Forget: %v", k)
	}
	// A guest int3 at a former site stays the guest's.
	code[len(nops)] = 0xCC
	if _, k := p.Restart(site+1, false); k != NoRestart {
		t.Errorf("guest int3: %v", k)
	}
}

// prefixBefore: the byte before off would be a prefix of an instruction
// at off-1 (legacy prefixes, REX, the escape bytes of VEX, EVEX and XOP).
func prefixBefore(code []byte, off int) bool {
	if off < 1 {
		return false
	}
	b := code[off-1]
	return b >= 0x40 && b <= 0x4F || bytes.IndexByte([]byte{0x66, 0x67, 0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0x62, 0xC4, 0xC5, 0x8F}, b) >= 0
}

// fromParts is the fuzzers' code: parts picked by the fuzzer's bytes,
// false for more than max picks.
func fromParts(pick []byte, parts [][]byte, max int) ([]byte, bool) {
	if len(pick) > max {
		return nil, false
	}
	var code []byte
	for _, p := range pick {
		code = append(code, parts[int(p)%len(parts)]...)
	}
	return code, true
}

func bytesJoin(l []string) []byte {
	var b []byte
	for _, s := range l {
		b = append(b, s...)
	}
	return b
}

// oracle decodes code linearly from the start of the window X86Site
// looks at (window: the rule its sweeps follow, an undecodable byte
// stepped over) and reports whether off is an instruction boundary where
// `mov $nr,%eax; syscall` is, and no direct branch of that decoding
// targets off+1 ... off+6.
func oracle(code []byte, off int, nr uint32) bool {
	at := map[int]x86asm.Inst{}
	into := false
	for i := window(off); i < len(code); {
		in, err := decode(code[i:])
		if err != nil || in.Len == 0 {
			i++
			continue
		}
		at[i] = in
		if tgt, ok := directTarget(in, uint64(i)); ok && (tgt > uint64(off) && tgt < uint64(off)+7 || prefixBefore(code, off) && tgt == uint64(off)-1) {
			into = true
		}
		i += in.Len
	}
	mov, ok1 := at[off]
	sc, ok2 := at[off+5]
	if !ok1 || !ok2 || into || sc.Op != x86asm.SYSCALL || mov.Op != x86asm.MOV || mov.Len != 5 {
		return false
	}
	r, _ := mov.Args[0].(x86asm.Reg)
	imm, _ := mov.Args[1].(x86asm.Imm)
	return r == x86asm.EAX && uint32(imm) == nr
}

// FuzzSiteX86 checks X86Site against the oracle on any bytes: every site
// it accepts is a real `mov; syscall` pair, and patching it leaves every
// instruction around it unchanged.
func FuzzSiteX86(f *testing.F) {
	f.Add(cat(nops, movSyscall(39), ret))
	f.Add(cat([]byte{0x8B}, movSyscall(39), ret))
	f.Add(cat([]byte{0x48, 0xC7, 0xC0}, movSyscall(1)))
	f.Add(cat([]byte{0xEB, 0x05}, movSyscall(0), []byte{0x75, 0xFC}))
	f.Fuzz(func(t *testing.T, code []byte) {
		if len(code) > 4096 {
			return
		}
		checkFind(t, code, 0x1000) // extended sites too (x86moves.go)
		for off := 0; off+7 <= len(code); off++ {
			if code[off] != 0xB8 || code[off+5] != 0x0F || code[off+6] != 0x05 {
				continue
			}
			nr := binary.LittleEndian.Uint32(code[off+1:])
			tx := &X86Text{Base: 0x1000, Code: code}
			site, err := X86Site(tx, 0x1000+uint64(off+7), nr)
			if err != nil {
				continue
			}
			if site != 0x1000+uint64(off) || !oracle(code, off, nr) {
				t.Fatalf("accepted a site at %d the linear decoding does not have: % x", off, code)
			}
			patched := append([]byte(nil), code...)
			j := X86Jump(X86SlotAddr(1))
			copy(patched[off:], j[:])
			before, after := decodeAll(code), decodeAll(patched)
			for a, in := range before {
				if a >= off && a < off+7 || in.Op == 0 {
					continue
				}
				if b, ok := after[a]; !ok || b.String() != in.String() {
					t.Fatalf("the patch at %d changed the instruction at %d: %v -> %v", off, a, in, b)
				}
			}
		}
	})
}

// window is where the oracles' decoding of a site at off starts: the
// text's start, or sweepBack bytes before the site, where X86Site's
// longest sweep starts. The scanner sees nothing before it, so a stream
// whose decoding from the text's start stays out of step with the one
// from the window for longer (stepping over an undecodable byte every few
// bytes, which no executed code does: FuzzSiteX86Stream's crasher
// 161e9acba6483aa9, 1,074 bytes) is judged from the window.
func window(off int) int {
	return max(0, off-sweepBack)
}

func decodeAll(code []byte) map[int]x86asm.Inst { return decodeFrom(code, 0) }

// decodeFrom decodes code linearly from offset s, stepping over an
// undecodable byte.
func decodeFrom(code []byte, s int) map[int]x86asm.Inst {
	m := map[int]x86asm.Inst{}
	for i := s; i < len(code); {
		in, err := decode(code[i:])
		if err != nil || in.Len == 0 {
			i++
			continue
		}
		m[i] = in
		i += in.Len
	}
	return m
}

// embedded are instructions with 0F 05 inside them (as an immediate, a
// displacement, a ModRM pair), and the real pair.
var embedded = [][]byte{
	{0xB8, 0x0F, 0x05, 0x00, 0x00},                   // mov $0x50f,%eax
	{0x48, 0xB8, 0xB8, 0x27, 0, 0, 0, 0x0F, 0x05, 0}, // movabs with the pair inside
	{0x8B, 0xB8, 0x27, 0, 0, 0},                      // mov 0x27(%rax),%edi, then 0F 05 follows as data
	{0x0F, 0x05},                                     // syscall alone
	{0xB8, 0x27, 0, 0, 0, 0x0F, 0x05},                // the real pair
	{0x90}, {0xC3}, {0x55},
	{0x75, 0xF9},                         // jne -7
	{0xEB, 0x02},                         // jmp +2
	{0x41, 0xB8, 0x27, 0, 0, 0},          // mov $39,%r8d
	{0xC7, 0x80, 0, 0, 0, 0, 0xB8, 0x27}, // movl $..,disp(%rax) (imm cut: continues in the next)
	{0x66, 0x0F, 0x05},
}

// FuzzSiteX86Stream builds instruction streams from embedded: a pair
// inside a longer instruction is never accepted.
func FuzzSiteX86Stream(f *testing.F) {
	f.Add([]byte{4, 5, 0, 4, 1, 4, 2, 4})
	f.Add([]byte{9, 4, 8, 10, 4, 11, 4, 12, 4})
	f.Fuzz(func(t *testing.T, pick []byte) {
		code, ok := fromParts(pick, embedded, 512)
		if !ok {
			return
		}
		checkFind(t, code, 0x7000)
		for off := 0; off+7 <= len(code); off++ {
			if code[off] != 0xB8 || code[off+5] != 0x0F || code[off+6] != 0x05 {
				continue
			}
			nr := binary.LittleEndian.Uint32(code[off+1:])
			tx := &X86Text{Base: 0x7000, Code: code}
			if _, err := X86Site(tx, 0x7000+uint64(off+7), nr); err == nil && !oracle(code, off, nr) {
				t.Fatalf("accepted a pair inside another instruction at %d: % x", off, code)
			}
		}
	})
}

// A sweep that starts inside an instruction of the reference sweep (the
// longest) and meets bytes it cannot decode near the site does not
// refuse it: busybox's munmap wrapper, after a mov whose immediate is
// FF FF FF FF, where the sweep from 16 bytes back starts in that
// immediate. Bytes the reference itself cannot decode there still refuse.
func TestX86SiteMisalignedSweep(t *testing.T) {
	munmap := []byte{
		0x48, 0xC7, 0xC0, 0xFF, 0xFF, 0xFF, 0xFF, // mov $-1,%rax
		0xC3,                                                       // ret
		0x66, 0x2E, 0x0F, 0x1F, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, // cs nopw
		0x66, 0x90, // xchg %ax,%ax
	}
	code := cat(nops, nops, nops, []byte{0x90, 0x90, 0x90, 0x90}, munmap, movSyscall(11), ret)
	ip := testBase + uint64(len(code)-1)
	site := ip - 7
	if off := int(site - testBase); code[off-16] != 0xFF || code[off-15] != 0xFF {
		t.Fatalf("the 16-byte sweep does not start in the immediate: % x", code[off-16:off])
	}
	got, err := X86Site(&X86Text{Base: testBase, Code: code}, ip, 11)
	if err != nil || got != site {
		t.Errorf("munmap wrapper: %#x, %v", got, err)
	}
	// The reference meets an undecodable byte 3 bytes before the mov.
	bad := cat(nops, nops, nops, []byte{0x62, 0x90}, movSyscall(11), ret) // 62: EVEX, which x86asm does not decode
	if _, err := decode(bad[len(nops)*3:]); err == nil {
		t.Fatalf("x86asm decodes % x", bad[len(nops)*3:])
	}
	if _, err := X86Site(&X86Text{Base: testBase, Code: bad}, testBase+uint64(len(bad)-1), 11); !errors.Is(err, ErrBoundary) {
		t.Logf("bytes: % x", bad)
		t.Errorf("undecodable bytes in the reference near the site: %v, want %v", err, ErrBoundary)
	}
}
