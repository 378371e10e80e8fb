package rewrite

import (
	"errors"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

var (
	// libc's generic entries, as their compilers emit them.
	muslSyscallCpC = []byte{ // musl 1.2 __syscall_cp_c (static, no pthread_cancel)
		0x48, 0x89, 0xF8, // mov %rdi,%rax
		0x4D, 0x89, 0xC2, // mov %r8,%r10
		0x48, 0x89, 0xF7, // mov %rsi,%rdi
		0x4D, 0x89, 0xC8, // mov %r9,%r8
		0x48, 0x89, 0xD6, // mov %rdx,%rsi
		0x4C, 0x8B, 0x4C, 0x24, 0x08, // mov 0x8(%rsp),%r9: the lead
		0x48, 0x89, 0xCA, // mov %rcx,%rdx
		0x0F, 0x05,
	}
	glibcSyscall = []byte{ // glibc syscall(3)
		0x48, 0x89, 0xF8, 0x48, 0x89, 0xF7, 0x48, 0x89, 0xD6, 0x48, 0x89, 0xCA,
		0x4D, 0x89, 0xC2, 0x4D, 0x89, 0xC8,
		0x4C, 0x8B, 0x4C, 0x24, 0x08, // mov 0x8(%rsp),%r9
		0x0F, 0x05,
	}
	muslCpAsm = []byte{ // musl __syscall_cp_asm (libc.so), after the cancel check
		0x49, 0x89, 0xFB, 0x48, 0x89, 0xF0, 0x48, 0x89, 0xD7, 0x48, 0x89, 0xCE,
		0x4C, 0x89, 0xC2, 0x4D, 0x89, 0xCA,
		0x4C, 0x8B, 0x44, 0x24, 0x08, // mov 0x8(%rsp),%r8
		0x4C, 0x8B, 0x4C, 0x24, 0x10, // mov 0x10(%rsp),%r9
		0x4C, 0x89, 0x5C, 0x24, 0x08, // mov %r11,0x8(%rsp): the lead, a store
		0x0F, 0x05,
	}
	leadImmEcx = []byte{0xB9, 5, 0, 0, 0}          // mov $5,%ecx
	leadRax    = []byte{0x48, 0x8B, 0x44, 0x24, 8} // mov 8(%rsp),%rax: writes the number
	leadR12    = []byte{0x4D, 0x8B, 0x4C, 0x24, 8} // mov 8(%r12),%r9 (REX.B): not the stack
	leadRip    = []byte{0x8B, 0x05, 0, 0, 0, 0}    // mov 0(%rip),%eax
	movRsiRax  = []byte{0x48, 0x89, 0xF0}          // mov %rsi,%rax
)

// TestX86FindDynamic: the sites of libc's generic entries are found with
// their lead and moves; other shapes are refused, and none is found
// without dynamic.
func TestX86FindDynamic(t *testing.T) {
	syscall := []byte{0x0F, 0x05}
	cases := []struct {
		name       string
		code       []byte
		lead       int // offset of the lead in code, -1: refused
		moves      int
		wantErr    error
		staticSite bool
	}{
		{"musl __syscall_cp_c", muslSyscallCpC, 15, 1, nil, false},
		{"glibc syscall(3)", glibcSyscall, 18, 0, nil, false},
		{"musl __syscall_cp_asm (a store)", muslCpAsm, 28, 0, nil, false},
		{"mov $imm32,%ecx then a move", cat(movRcxR10, leadImmEcx, movRdxR10, syscall), 3, 1, nil, false},
		{"a prefix-like byte (F0, a ModRM) before the lead", cat(movRsiRax, leadImmEcx, movRdxR10, syscall), 3, 1, nil, false},
		{"the lead writes %rax", cat(movRsiRax, leadRax, syscall), -1, 0, ErrLead, false},
		{"a move after the lead writes %rax", cat(leadImmEcx, movRdiRax, syscall), -1, 0, ErrLead, false},
		{"REX.B: %r12, not the stack", cat(movRsiRax, leadR12, syscall), -1, 0, ErrLead, false},
		{"3-byte moves only", cat(movRsiRax, movRdxR10, movR9Rdi, syscall), -1, 0, ErrLead, false},
		{"xor between", cat(movRsiRax, leadImmEcx, xorEdx, syscall), -1, 0, ErrLead, false},
		{"rip-relative load", cat(leadRip, syscall), -1, 0, ErrLead, false},
		{"mov $nr,%eax is a static site", cat(leadImmEcx, movSyscall(39)), 5, 0, nil, true},
	}
	for _, c := range cases {
		code := cat(nops, c.code, ret)
		tx := &X86Text{Base: testBase, Code: code}
		ip := testBase + uint64(len(code)-1)
		si, err := X86FindSite(tx, ip, 39, true)
		if c.lead < 0 {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("%s: %+v, %v, want %v", c.name, si, err, c.wantErr)
			}
			continue
		}
		site := testBase + uint64(len(nops)+c.lead)
		if err != nil || si.Site != site || si.Dynamic == c.staticSite || len(si.Moves) != c.moves || si.Len != len(c.code)-c.lead {
			t.Errorf("%s: %+v, %v; want the site at %#x, %d moves", c.name, si, err, site, c.moves)
			continue
		}
		if _, err := X86FindSite(tx, ip, 39, false); !c.staticSite && !errors.Is(err, ErrNoMov) {
			t.Errorf("%s: without dynamic: %v", c.name, err)
		}
	}
}

// The stub decodes as the choice X86StubDyn describes, its branches land
// where they should, and musl's __syscall_cp_c's fits a stub.
func TestX86StubDyn(t *testing.T) {
	code := cat(nops, muslSyscallCpC, ret)
	tx := &X86Text{Base: testBase, Code: code}
	si, err := X86FindSite(tx, testBase+uint64(len(code)-1), 2, true)
	if err != nil {
		t.Fatal(err)
	}
	const ret = 0x401234
	s := X86StubDyn(si.Lead, si.Moves, ret)
	if len(s) > X86StubSize {
		t.Fatalf("stub of %d bytes", len(s))
	}
	const at = 0x7000000 // where the stub is mapped, for targets
	type want struct {
		op  x86asm.Op
		arg string
	}
	wants := []want{
		{x86asm.MOV, "R9"}, {x86asm.MOV, "RDX"}, // the lead and the move
		{x86asm.MOV, "ECX"}, {x86asm.SHRX, "RCX"}, {x86asm.JRCXZ, ""}, {x86asm.JMP, ""},
		{x86asm.MOVZX, "ECX"}, {x86asm.JRCXZ, ""},
		{x86asm.MOV, "RCX"}, {x86asm.JMP, ""},
		{x86asm.SYSCALL, ""}, {x86asm.JMP, ""},
	}
	var starts []int
	var insts []x86asm.Inst
	for i := 0; i < len(s); {
		in, err := decode(s[i:])
		if err != nil {
			t.Fatalf("at %d: %v (% x)", i, err, s)
		}
		starts, insts = append(starts, i), append(insts, in)
		i += in.Len
	}
	if len(insts) != len(wants) {
		t.Fatalf("%d instructions, want %d: %v", len(insts), len(wants), insts)
	}
	for i, w := range wants {
		if insts[i].Op != w.op || w.arg != "" && insts[i].Args[0].String() != w.arg {
			t.Errorf("instruction %d: %v, want %v %s", i, insts[i], w.op, w.arg)
		}
	}
	native := starts[10]
	if native != X86DynNative(len(si.Lead)+len(si.Moves[0].Bytes)) {
		t.Errorf("syscall at %d, X86DynNative says %d", native, X86DynNative(8))
	}
	target := func(i int) int {
		tgt, ok := directTarget(insts[i], at+uint64(starts[i]))
		if !ok {
			t.Fatalf("instruction %d: %v is no direct branch", i, insts[i])
		}
		return int(tgt - at)
	}
	if target(4) != starts[6] || target(5) != native || target(7) != native {
		t.Errorf("branches to %d %d %d, want %d %d %d", target(4), target(5), target(7), starts[6], native, native)
	}
	if m, _ := insts[6].Args[1].(x86asm.Mem); m.Base != x86asm.RAX || uint32(m.Disp) != X86DynTable {
		t.Errorf("table load %v", insts[6])
	}
	if m, _ := insts[9].Args[0].(x86asm.Mem); uint32(m.Disp) != X86SlotAddr(X86DynEntrySlot) {
		t.Errorf("entry jump %v", insts[9])
	}
	if imm, _ := insts[8].Args[1].(x86asm.Imm); uint64(imm) != ret {
		t.Errorf("movabs %v", insts[8])
	}
	// The last jump reads the movabs's immediate.
	m, _ := insts[11].Args[0].(x86asm.Mem)
	if m.Base != x86asm.RIP || starts[11]+insts[11].Len+int(int32(m.Disp)) != starts[8]+2 {
		t.Errorf("return jump %v reads offset %d, the immediate is at %d", insts[11], starts[11]+insts[11].Len+int(int32(m.Disp)), starts[8]+2)
	}
	if X86DynTable+X86DynNrs != X86SlotBase+X86SlotBytes || X86SlotAddr(X86DynEntrySlot)+8 != X86DynTable {
		t.Errorf("table %#x, entry slot %#x", X86DynTable, X86SlotAddr(X86DynEntrySlot))
	}
}

// oracleDyn decodes code linearly from the scanner's window (window)
// and reports whether a dynamic site si is real there: a lead (5 bytes, a
// MOV), then moves only, then the syscall ending at site+Len; nothing of
// that decoding writes %rax or %rsp there; no direct branch into site+1
// ... site+6; no instruction overlapping the patched bytes but the lead
// and the one at site+5.
func oracleDyn(code []byte, base uint64, si X86SiteInfo) bool {
	off := int(si.Site - base)
	at := decodeFrom(code, window(off))
	if patchDisturbs(code, at, off) {
		return false
	}
	writes := func(in x86asm.Inst) bool {
		r, ok := in.Args[0].(x86asm.Reg)
		return ok && (r == x86asm.RAX || r == x86asm.EAX || r == x86asm.RSP || r == x86asm.ESP)
	}
	lead, ok := at[off]
	if !ok || lead.Op != x86asm.MOV || lead.Len != 5 || writes(lead) {
		return false
	}
	i := off + 5
	for _, m := range si.Moves {
		in, ok := at[i]
		if !ok || in.Len != len(m.Bytes) || in.Op != x86asm.MOV && in.Op != x86asm.MOVSXD || writes(in) {
			return false
		}
		i += in.Len
	}
	sc, ok := at[i]
	return ok && sc.Op == x86asm.SYSCALL && i+2 == off+si.Len
}

// FuzzSiteX86Dyn: dynamic sites, from streams of leads, moves, pairs and
// instructions that hide 0F 05 inside them: whatever X86FindSite accepts
// is real.
func FuzzSiteX86Dyn(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{4, 5, 6, 3, 7})
	parts := append([][]byte{
		{0x4C, 0x8B, 0x4C, 0x24, 0x08}, movRdxR10, leadImmEcx, {0x0F, 0x05}, movRsiRax,
		{0x4C, 0x89, 0x5C, 0x24, 0x08}, leadRax, leadR12, movMemRdi, xorEdx, movEaxEdi,
		{0x48, 0xB8, 0xB9, 2, 0, 0, 0, 0x0F, 0x05, 0}, // movabs hiding a lead and a pair
		{0xEB, 0x03}, {0x75, 0xF6},
		{0x89, 0xF2}, {0x41}, {0xEB, 0x01}, {0x75, 0xF4}, // prefix-like last bytes, branches to them
	}, embedded...)
	f.Fuzz(func(t *testing.T, pick []byte) {
		code, ok := fromParts(pick, parts, 256)
		if !ok {
			return
		}
		const base = 0x9000
		for e := 0; e+2 <= len(code); e++ {
			if code[e] != 0x0F || code[e+1] != 0x05 {
				continue
			}
			tx := &X86Text{Base: base, Code: code}
			si, err := X86FindSite(tx, base+uint64(e+2), 0x7FFFFFFF, true) // a number no B8 before it gives
			if err != nil || !si.Dynamic {
				continue
			}
			if !oracleDyn(code, base, si) {
				t.Fatalf("accepted a dynamic site at %#x (len %d, %d moves) the linear decoding does not have: % x", si.Site, si.Len, len(si.Moves), code)
			}
		}
	})
}

// A dynamic site patched: a thread at the stub's own syscall, or right
// after it, maps to the site's syscall and to the address after it; other
// points of the stub, static sites and forgotten ones map nowhere; a
// thread caught at site+5 is served as the syscall.
func TestX86InStub(t *testing.T) {
	code := cat(nops, muslSyscallCpC, ret, nops, movSyscall(39), ret)
	m := &fakeMem{code: code, base: testBase, slots: map[int]uint64{}}
	p := &X86Patcher{Mem: m}
	tx := &X86Text{Base: testBase, Code: code}
	ip := testBase + uint64(len(nops)+len(muslSyscallCpC))
	si, err := X86FindSite(tx, ip, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := p.PatchSite(si, 0, StubCall, func(int) []byte { return X86StubDyn(si.Lead, si.Moves, ip) })
	if err != nil {
		t.Fatal(err)
	}
	static := testBase + uint64(2*len(nops)+len(muslSyscallCpC)+1)
	if _, err := p.Patch(static, 39, StubCall, func(int) []byte { return nil }); err != nil {
		t.Fatal(err)
	}
	native := X86DynNative(8)
	for _, c := range []struct {
		slot, off int
		to        uint64
		ok        bool
	}{
		{pt.Slot, native, ip - 2, true},
		{pt.Slot, native + 2, ip, true},
		{pt.Slot, native - 1, 0, false},
		{pt.Slot, 0, 0, false},
		{pt.Slot + 1, native, 0, false}, // the static site's stub
	} {
		if to, ok := p.InStub(c.slot, c.off); to != c.to || ok != c.ok {
			t.Errorf("InStub(%d, %d) = %#x %v, want %#x %v", c.slot, c.off, to, ok, c.to, c.ok)
		}
	}
	if s, k := p.Restart(si.Site+5, true); s != si.Site || k != AsSyscall {
		t.Errorf("Restart(site+5, SIGILL) = %#x %v", s, k)
	}
	p.Forget(si.Site, si.Site+1, true)
	if _, ok := p.InStub(pt.Slot, native); ok {
		t.Errorf("InStub of a forgotten site")
	}
}
