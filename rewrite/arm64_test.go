package rewrite

import (
	"encoding/binary"
	"errors"
	"math/rand"
	"os"
	"testing"

	"golang.org/x/arch/arm64/arm64asm"
)

func arm64Decode(t testing.TB, w uint32) arm64asm.Inst {
	t.Helper()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], w)
	inst, err := arm64asm.Decode(b[:])
	if err != nil {
		t.Fatalf("%08x does not decode: %v", w, err)
	}
	return inst
}

// arm64CheckB checks with the decoder that w, placed at from, is B to.
func arm64CheckB(t testing.TB, w uint32, from, to uint64) {
	t.Helper()
	inst := arm64Decode(t, w)
	rel, ok := inst.Args[0].(arm64asm.PCRel)
	if inst.Op != arm64asm.B || !ok || inst.Args[1] != nil {
		t.Fatalf("%08x at %#x decodes as %v, want B", w, from, inst)
	}
	if got := from + uint64(rel); got != to {
		t.Fatalf("%08x at %#x: B to %#x, want %#x", w, from, got, to)
	}
	if got, ok := Arm64BTarget(from, w); !ok || got != to {
		t.Fatalf("Arm64BTarget(%#x, %08x) = %#x, %v; want %#x", from, w, got, ok, to)
	}
}

func TestArm64B(t *testing.T) {
	const base = 0x0000_aaaa_0000_0000
	for _, c := range []struct {
		name     string
		from, to uint64
		err      error
	}{
		{"self", base, base, nil},
		{"next", base, base + 4, nil},
		{"back one", base, base - 4, nil},
		{"farthest forward", base, base + Arm64BRange - 4, nil},
		{"one past forward", base, base + Arm64BRange, ErrArm64Range},
		{"farthest back", base, base - Arm64BRange, nil},
		{"one past back", base, base - Arm64BRange - 4, ErrArm64Range},
		{"4 GiB away", base, base + 1<<32, ErrArm64Range},
		{"misaligned from", base + 2, base + 8, ErrArm64Align},
		{"misaligned to", base, base + 6, ErrArm64Align},
		{"wraps below zero", 0, 0xffff_ffff_ffff_fffc, nil},
		{"wraps above top", 0xffff_ffff_ffff_fffc, 8, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := Arm64B(c.from, c.to)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("Arm64B(%#x, %#x) = %08x, %v; want %v", c.from, c.to, w, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			arm64CheckB(t, w, c.from, c.to)
		})
	}
}

func TestArm64EncodersDecode(t *testing.T) {
	lit, err := arm64LDRLit(16, 0x1000, 0x1010)
	if err != nil {
		t.Fatal(err)
	}
	cbnz, err := arm64CBNZ(17, 0x1000, 0x0ff0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		w    uint32
		want string
	}{
		{Arm64SVC0, "SVC #0x0"},
		{arm64BR(16), "BR X16"},
		{arm64BLR(16), "BLR X16"},
		{arm64BRK(0), "BRK #0x0"},
		{lit, "LDR X16, .+0x10"},
		{cbnz, "CBNZ X17, .+0xfffffffffffffff0"},
		{arm64Pair(false, false, arm64Pre, 16, 17, 31, -16), "STP X16, X17, [SP,#-16]!"},
		{arm64Pair(true, false, arm64Post, 16, 17, 31, 16), "LDP X16, X17, [SP],#16"},
		{arm64Pair(false, false, arm64Offset, 0, 1, 31, 504), "STP X0, X1, [SP,#504]"},
		{arm64Pair(true, true, arm64Offset, 30, 31, 31, 1008), "LDP Q30, Q31, [SP,#1008]"},
		{arm64Pair(false, true, arm64Offset, 0, 1, 31, -1024), "STP Q0, Q1, [SP,#-1024]"},
		{arm64LdrStrX(false, 30, 31, 240), "STR X30, [SP,#240]"},
		{arm64LdrStrX(true, 16, 31, 32760), "LDR X16, [SP,#32760]"},
		{arm64AddSubImm(true, 31, 31, 800), "SUB SP, SP, #0x320"},
		{arm64AddSubImm(false, 0, 31, 0), "MOV X0, SP"},
		{arm64MRS(16, arm64NZCV), "MRS X16, S3_3_C4_C2_0"},
		{arm64MRS(17, arm64FPCR), "MRS X17, S3_3_C4_C4_0"},
		{arm64MSR(arm64FPSR, 16), "MSR S3_3_C4_C4_1, X16"},
	} {
		if got := arm64Decode(t, c.w).String(); got != c.want {
			t.Errorf("%08x decodes as %q, want %q", c.w, got, c.want)
		}
	}
	if _, err := arm64LDRLit(16, 0x1000, 0x1000+1<<20); !errors.Is(err, ErrArm64Range) {
		t.Errorf("ldr literal 1 MiB away: %v, want out of range", err)
	}
	if _, err := arm64LDRLit(16, 0x1000, 0x1002); !errors.Is(err, ErrArm64Align) {
		t.Errorf("misaligned literal: %v", err)
	}
}

// arm64Literals returns the indices of the literal words of code placed
// at base: the words its LDR (literal) instructions load, as the decoder
// reads them.
func arm64Literals(t testing.TB, code []uint32, base uint64) map[int]bool {
	t.Helper()
	lits := map[int]bool{}
	for i := 0; i < len(code); i++ {
		if lits[i] {
			continue
		}
		inst := arm64Decode(t, code[i])
		if rel, ok := inst.Args[1].(arm64asm.PCRel); ok && inst.Op == arm64asm.LDR {
			at := base + uint64(i)*4 + uint64(rel)
			j := int((at - base) / 4)
			if at%8 != 0 || at < base || j+1 >= len(code) {
				t.Fatalf("%v at %#x: literal at %#x outside the code or misaligned", inst, base+uint64(i)*4, at)
			}
			lits[j], lits[j+1] = true, true
		}
	}
	return lits
}

// arm64Text is a little guest text: some instructions and an svc site.
func arm64Text(base uint64, words ...uint32) Arm64SliceAlias {
	mem := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(mem[4*i:], w)
	}
	return Arm64SliceAlias{Base: base, Mem: mem}
}

func TestArm64CheckSite(t *testing.T) {
	const base = 0x400000
	movW8 := func(nr uint32) uint32 { return 0x52800008 | nr<<5 } // movz w8, #nr
	movX8 := func(nr uint32) uint32 { return 0xd2800008 | nr<<5 } // movz x8, #nr
	nop := uint32(0xd503201f)
	for _, c := range []struct {
		name  string
		words []uint32
		pc    uint64
		nr    int
		fixed int
		bad   bool
	}{
		{"generic", []uint32{nop, Arm64SVC0, nop}, base + 8, 63, -1, false},
		{"mov w8 before", []uint32{movW8(172), Arm64SVC0}, base + 8, 172, 172, false},
		{"mov x8 before", []uint32{movX8(63), Arm64SVC0}, base + 8, 63, 63, false},
		{"mov for another number", []uint32{movW8(172), Arm64SVC0}, base + 8, 63, -1, false},
		{"first word", []uint32{Arm64SVC0}, base + 4, 63, -1, false},
		{"rt_sigreturn site", []uint32{movX8(139), Arm64SVC0}, base + 8, 139, 0, true},
		{"exit_group site", []uint32{movW8(94), Arm64SVC0}, base + 8, 94, 0, true},
		{"clone through a generic site", []uint32{nop, Arm64SVC0}, base + 8, 220, -1, false},
		{"svc #1", []uint32{nop, 0xd4000021}, base + 8, 63, 0, true},
		{"hvc #0", []uint32{nop, 0xd4000002}, base + 8, 63, 0, true},
		{"not svc", []uint32{Arm64SVC0, nop}, base + 8, 63, 0, true},
		{"misaligned pc", []uint32{Arm64SVC0, nop}, base + 6, 63, 0, true},
		{"pc at base", []uint32{Arm64SVC0}, base, 63, 0, true},
		{"pc past the end", []uint32{Arm64SVC0}, base + 8, 63, 0, true},
		{"pc zero", []uint32{Arm64SVC0}, 0, 63, 0, true},
		{"pc far below", []uint32{Arm64SVC0}, 4, 63, 0, true},
		{"no code", nil, base + 4, 63, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := arm64Text(base, c.words...)
			s, err := Arm64CheckSite(text.Mem, base, c.pc, c.nr)
			if c.bad {
				if !errors.Is(err, ErrArm64NotSite) {
					t.Fatalf("got %+v, %v; want ErrArm64NotSite", s, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Addr != c.pc-4 || s.FixedNR != c.fixed {
				t.Fatalf("got %+v, want site %#x fixed %d", s, c.pc-4, c.fixed)
			}
		})
	}
}

// arm64Placement is one layout of site, stub and veneer for the stub
// tests.
type arm64Placement struct {
	name               string
	site, stub, veneer uint64 // veneer 0: direct
	entry              uint64
}

var arm64Placements = []arm64Placement{
	{"near", 0x0000_aaaa_0040_1000, 0x0000_aaaa_0800_0000, 0, 0x0000_ffff_8000_1000},
	{"near below the site", 0x0000_aaaa_07ff_1000, 0x0000_aaaa_0000_0000, 0, 0x0000_ffff_8000_1000},
	{"far through a veneer", 0x0000_aaaa_0040_1000, 0x0000_ffff_a000_0000, 0x0000_aaaa_0020_0000, 0x0000_ffff_8000_1000},
	{"veneer at the edge of reach", 0x0000_aaaa_0800_0000, 0x0000_0000_1000_0000, 0x0000_aaaa_0000_0020, 0x0000_ffff_8000_1000},
}

// TestArm64StubDecodes: every instruction of every stub decodes; the
// literals are where the LDRs say and hold the entry, the return address
// and the return veneer.
func TestArm64StubDecodes(t *testing.T) {
	for _, p := range arm64Placements {
		t.Run(p.name, func(t *testing.T) {
			st := Arm64Stub{Site: p.site, Addr: p.stub, Entry: p.entry}
			if p.veneer != 0 {
				st.Return = p.veneer + Arm64VeneerReturn
			}
			code, err := Arm64StubCode(st)
			if err != nil {
				t.Fatal(err)
			}
			if len(code)*4 > Arm64StubSlot {
				t.Fatalf("stub is %d bytes", len(code)*4)
			}
			lits := map[uint64]bool{}
			var loaded []uint64
			svcs, blrs := 0, 0
			for i := 0; i < len(code); i++ {
				pc := p.stub + uint64(i)*4
				if lits[pc] {
					i++ // the literal's high word
					continue
				}
				inst := arm64Decode(t, code[i])
				switch inst.Op {
				case arm64asm.LDR:
					if rel, ok := inst.Args[1].(arm64asm.PCRel); ok {
						at := pc + uint64(rel)
						j := int(at-p.stub) / 4
						if at%8 != 0 || j+1 >= len(code) {
							t.Fatalf("%#x: %v: literal at %#x outside the stub or misaligned", pc, inst, at)
						}
						lits[at] = true
						loaded = append(loaded, uint64(code[j+1])<<32|uint64(code[j]))
					}
				case arm64asm.SVC:
					svcs++
				case arm64asm.BLR:
					blrs++
				case arm64asm.B:
					rel := inst.Args[0].(arm64asm.PCRel)
					if pc+uint64(rel) != p.site+4 {
						t.Errorf("%#x: B to %#x, want the site's return %#x", pc, pc+uint64(rel), p.site+4)
					}
				}
			}
			if svcs != 1 || blrs != 1 {
				t.Errorf("%d svc and %d blr, want one each", svcs, blrs)
			}
			want := map[uint64]bool{p.site + 4: true, p.entry: true}
			if p.veneer != 0 {
				want[p.veneer+Arm64VeneerReturn] = true
			}
			seen := map[uint64]bool{}
			for _, v := range loaded {
				if !want[v] {
					t.Errorf("a literal holds %#x, which is none of %v", v, want)
				}
				seen[v] = true
			}
			for v := range want {
				if !seen[v] {
					t.Errorf("no literal holds %#x", v)
				}
			}
		})
	}
}

func TestArm64StubErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Arm64Stub
		err  error
	}{
		{"misaligned stub", Arm64Stub{Site: 0x1000, Addr: 0x2004, Entry: 0x9000}, ErrArm64Align},
		{"misaligned site", Arm64Stub{Site: 0x1002, Addr: 0x2000, Entry: 0x9000}, ErrArm64Align},
		{"far without a return veneer", Arm64Stub{Site: 0x1000, Addr: 0x1000 + 1<<30, Entry: 0x9000}, ErrArm64Range},
		{"no entry", Arm64Stub{Site: 0x1000, Addr: 0x2000}, nil},
	} {
		if _, err := Arm64StubCode(c.s); err == nil || (c.err != nil && !errors.Is(err, c.err)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	for _, c := range []struct {
		name          string
		site, v, stub uint64
		err           error
	}{
		{"veneer out of reach", 0x1000_0000, 0x1000_0000 + Arm64BRange, 0x1_0000_0000, ErrArm64Range},
		{"veneer misaligned", 0x1000_0000, 0x1000_0010, 0x1_0000_0000, ErrArm64Align},
		{"stub misaligned", 0x1000_0000, 0x1000_0020, 0x1_0000_0004, ErrArm64Align},
	} {
		if _, err := Arm64VeneerCode(c.site, c.v, c.stub); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
}

// arm64Setup patches one site in a simulated address space: text with
// the site, a pool for stubs, and one for veneers when they are apart.
func arm64Setup(t *testing.T, p arm64Placement) (*Arm64Patcher, Arm64SliceAlias, []Arm64Alias, *[]uint64) {
	t.Helper()
	textBase := p.site - 0x100
	text := arm64Text(textBase, make([]uint32, 0x80)...)
	for i := 0; i < 0x80; i++ {
		binary.LittleEndian.PutUint32(text.Mem[4*i:], 0xd503201f) // nop
	}
	binary.LittleEndian.PutUint32(text.Mem[0x100:], Arm64SVC0)
	stubs := Arm64SliceAlias{Base: p.stub, Mem: make([]byte, 4*Arm64StubSlot)}
	pools := []*Arm64Pool{{Base: p.stub, Size: uint64(len(stubs.Mem)), Alias: stubs}}
	aliases := []Arm64Alias{text, stubs}
	if p.veneer != 0 {
		ven := Arm64SliceAlias{Base: p.veneer, Mem: make([]byte, 4*Arm64VeneerSize)}
		pools = append(pools, &Arm64Pool{Base: p.veneer, Size: uint64(len(ven.Mem)), Alias: ven})
		aliases = append(aliases, ven)
	}
	var synced []uint64
	pt := &Arm64Patcher{Text: text, Pools: pools, Entry: p.entry, Sync: func(addr, n uint64) {
		synced = append(synced, addr)
	}}
	return pt, text, aliases, &synced
}

// TestArm64PatchedSiteRuns patches a site, then runs the thread through
// the B, the veneer if any, the stub and a dispatch entry that clobbers
// every register, and checks that the guest gets back exactly what `svc`
// would have left it: every register but X0 as before, X0 the result;
// and that the entry saw the call's registers.
func TestArm64PatchedSiteRuns(t *testing.T) {
	for _, p := range arm64Placements {
		for _, replay := range []bool{false, true} {
			name := p.name + "/served"
			if replay {
				name = p.name + "/replayed"
			}
			t.Run(name, func(t *testing.T) {
				pt, _, aliases, synced := arm64Setup(t, p)
				pa, err := pt.Patch(Arm64Site{Addr: p.site, FixedNR: -1})
				if err != nil {
					t.Fatal(err)
				}
				if (pa.Veneer != 0) != (p.veneer != 0) {
					t.Fatalf("patch %+v: veneer used %v, want %v", pa, pa.Veneer != 0, p.veneer != 0)
				}
				// Stub (and veneer) synced before the site.
				if n := len(*synced); n == 0 || (*synced)[n-1] != p.site {
					t.Fatalf("synced %x: the site must be last", *synced)
				}
				rng := rand.New(rand.NewSource(int64(p.site)))
				s := &arm64Sim{code: aliases, mem: map[uint64]byte{}, entry: p.entry}
				for i := range s.X {
					s.X[i] = rng.Uint64()
				}
				s.X[8] = 63 // read
				for i := range s.Q {
					s.Q[i] = [2]uint64{rng.Uint64(), rng.Uint64()}
				}
				s.SP = 0x0000_ffff_f000_0000
				s.NZCV, s.FPSR, s.FPCR = 0x6000_0000, 0x0800_009f, 0x0340_0000
				s.PC = p.site
				before := *s
				// The guest's stack above SP: must not change.
				for a := s.SP; a < s.SP+64; a++ {
					s.mem[a] = byte(a)
				}
				const result = 0x1234
				entered := 0
				s.onEntry = func(s *arm64Sim) {
					entered++
					f := s.X[0]
					for i := 0; i < 31; i++ {
						if got := s.load(f+Arm64FrameX+8*uint64(i), 8); got != before.X[i] {
							t.Errorf("frame X%d = %#x, want %#x", i, got, before.X[i])
						}
					}
					for i := 0; i < 32; i++ {
						lo, hi := s.load(f+Arm64FrameQ+16*uint64(i), 8), s.load(f+Arm64FrameQ+16*uint64(i)+8, 8)
						if lo != before.Q[i][0] || hi != before.Q[i][1] {
							t.Errorf("frame Q%d wrong", i)
						}
					}
					if got := s.load(f+Arm64FramePC, 8); got != p.site+4 {
						t.Errorf("frame PC %#x, want %#x", got, p.site+4)
					}
					if got := s.load(f+Arm64FrameSP, 8); got != before.SP {
						t.Errorf("frame SP %#x, want %#x", got, before.SP)
					}
					if got := s.load(f+Arm64FrameNZCV, 8); got != before.NZCV {
						t.Errorf("frame NZCV %#x, want %#x", got, before.NZCV)
					}
					if f%16 != 0 || f+Arm64FrameSize+Arm64StubPush != before.SP {
						t.Errorf("frame at %#x, SP %#x", f, before.SP)
					}
					if !replay {
						s.store(f+Arm64FrameX, 8, result)
					}
					// An AAPCS64 function may clobber anything but SP
					// (and the callee-saved ones, which the stub does
					// not rely on): clobber them all.
					ret := s.X[30]
					for i := range s.X {
						s.X[i] = rng.Uint64()
					}
					for i := range s.Q {
						s.Q[i] = [2]uint64{rng.Uint64(), rng.Uint64()}
					}
					s.NZCV, s.FPSR, s.FPCR = 0x9000_0000, 0x1f, 0x0100_0000
					s.X[30] = ret
					if replay {
						s.X[0] = 1
					} else {
						s.X[0] = 0
					}
				}
				svcs := 0
				s.onSVC = func(s *arm64Sim) {
					svcs++
					if s.PC == p.site {
						t.Errorf("the site's svc ran: the patch is not there")
					}
					// The replayed svc sees the guest's registers.
					got := *s
					got.PC, got.trace, got.mem, got.code, got.onEntry, got.onSVC = before.PC, nil, nil, nil, nil, nil
					want := before
					want.trace, want.mem, want.code, want.onEntry, want.onSVC = nil, nil, nil, nil, nil
					if got.X != want.X || got.SP != want.SP || got.Q != want.Q || got.NZCV != want.NZCV || got.FPSR != want.FPSR || got.FPCR != want.FPCR {
						t.Errorf("registers at the replayed svc differ from the site's")
					}
					s.X[0] = result
				}
				if err := s.run(p.site+4, 1000); err != nil {
					t.Fatalf("%v\n%v", err, s.trace)
				}
				t.Logf("%d instructions from the site back to it, entry excluded", len(s.trace))
				if entered != 1 || svcs != map[bool]int{false: 0, true: 1}[replay] {
					t.Fatalf("entry ran %d times, svc %d", entered, svcs)
				}
				if s.X[0] != result {
					t.Errorf("X0 = %#x, want the result %#x", s.X[0], result)
				}
				for i := 1; i < 31; i++ {
					if s.X[i] != before.X[i] {
						t.Errorf("X%d = %#x, want %#x (kept by svc)", i, s.X[i], before.X[i])
					}
				}
				if s.SP != before.SP || s.Q != before.Q || s.NZCV != before.NZCV || s.FPSR != before.FPSR || s.FPCR != before.FPCR {
					t.Errorf("SP, Q, NZCV, FPSR or FPCR not kept")
				}
				for a := before.SP; a < before.SP+64; a++ {
					if s.mem[a] != byte(a) {
						t.Fatalf("stack above SP changed at %#x", a)
					}
				}
			})
		}
	}
}

func TestArm64PatchUnpatch(t *testing.T) {
	p := arm64Placements[0]
	pt, text, _, _ := arm64Setup(t, p)
	around := append([]byte(nil), text.Mem...)
	pa, err := pt.Patch(Arm64Site{Addr: p.site, FixedNR: -1})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := text.Load32(p.site)
	arm64CheckB(t, w, p.site, pa.Stub)
	if pa.Orig != Arm64SVC0 || pa.B != w {
		t.Fatalf("patch %+v, word %08x", pa, w)
	}
	// Only the site's word changed.
	for i := range text.Mem {
		if uint64(i)/4 != (p.site-text.Base)/4 && text.Mem[i] != around[i] {
			t.Fatalf("byte %#x around the site changed", text.Base+uint64(i))
		}
	}
	// Twice: the same patch.
	if again, err := pt.Patch(Arm64Site{Addr: p.site}); err != nil || again != pa {
		t.Fatalf("second patch: %+v, %v; want %+v", again, err, pa)
	}
	if got, ok := pt.Lookup(p.site); !ok || got != pa {
		t.Fatalf("Lookup: %+v %v", got, ok)
	}
	// mprotect over the site: the svc is back.
	if n, err := pt.Unpatch(p.site, p.site+4); n != 1 || err != nil {
		t.Fatalf("Unpatch: %d, %v", n, err)
	}
	if w, _ := text.Load32(p.site); w != Arm64SVC0 {
		t.Fatalf("after Unpatch the site holds %08x", w)
	}
	if len(pt.Patches()) != 0 {
		t.Fatalf("table not empty: %+v", pt.Patches())
	}
	// Patch again: the retired stub slot is not reused before Reclaim.
	pa2, err := pt.Patch(Arm64Site{Addr: p.site})
	if err != nil {
		t.Fatal(err)
	}
	if pa2.Stub == pa.Stub {
		t.Fatalf("stub slot %#x reused before Reclaim", pa.Stub)
	}
	// munmap: forgotten, not written (the text is gone).
	if n := pt.Forget(text.Base, text.Base+uint64(len(text.Mem))); n != 1 {
		t.Fatalf("Forget: %d", n)
	}
	if w, _ := text.Load32(p.site); w != pa2.B {
		t.Fatalf("Forget wrote the text: %08x", w)
	}
	pt.Reclaim()
	binary.LittleEndian.PutUint32(text.Mem[p.site-text.Base:], Arm64SVC0)
	pa3, err := pt.Patch(Arm64Site{Addr: p.site})
	if err != nil {
		t.Fatal(err)
	}
	if pa3.Stub != pa.Stub && pa3.Stub != pa2.Stub {
		t.Fatalf("after Reclaim a new slot %#x, not a reclaimed one", pa3.Stub)
	}
	// The guest rewrote its text after the patch: Unpatch leaves it.
	binary.LittleEndian.PutUint32(text.Mem[p.site-text.Base:], 0xd503201f)
	if n, err := pt.Unpatch(0, ^uint64(0)); n != 1 || err != nil {
		t.Fatalf("Unpatch: %d %v", n, err)
	}
	if w, _ := text.Load32(p.site); w != 0xd503201f {
		t.Fatalf("Unpatch overwrote the guest's word: %08x", w)
	}
}

func TestArm64PatchRefusals(t *testing.T) {
	// A site that is no longer svc.
	p := arm64Placements[0]
	pt, text, _, _ := arm64Setup(t, p)
	if _, err := pt.Patch(Arm64Site{Addr: p.site - 4}); !errors.Is(err, ErrArm64NotSite) {
		t.Fatalf("patch of a nop: %v", err)
	}
	// Far stub and no veneer pool: keeps trapping, text untouched.
	far := arm64Placements[2]
	pt, text, _, _ = arm64Setup(t, far)
	pt.Pools = pt.Pools[:1]
	if _, err := pt.Patch(Arm64Site{Addr: far.site}); !errors.Is(err, ErrArm64NoReach) {
		t.Fatalf("far stub without a veneer: %v", err)
	}
	if w, _ := text.Load32(far.site); w != Arm64SVC0 {
		t.Fatalf("refused patch wrote %08x", w)
	}
	// The pool is full after one stub.
	pt, text, _, _ = arm64Setup(t, p)
	pt.Pools[0].Size = Arm64StubSlot
	binary.LittleEndian.PutUint32(text.Mem[p.site-text.Base+8:], Arm64SVC0)
	if _, err := pt.Patch(Arm64Site{Addr: p.site}); err != nil {
		t.Fatal(err)
	}
	if _, err := pt.Patch(Arm64Site{Addr: p.site + 8}); !errors.Is(err, ErrArm64NoReach) {
		t.Fatalf("full pool: %v", err)
	}
	if w, _ := text.Load32(p.site + 8); w != Arm64SVC0 {
		t.Fatalf("refused patch wrote %08x", w)
	}
	// No entry.
	pt, _, _, _ = arm64Setup(t, p)
	pt.Entry = 0
	if _, err := pt.Patch(Arm64Site{Addr: p.site}); err == nil {
		t.Fatal("patch without an entry")
	}
}

// BenchmarkArm64Patch: checking, placing, generating and writing one
// site's stub and B (no cache maintenance), then dropping it.
func BenchmarkArm64Patch(b *testing.B) {
	const base = 0x0000_aaaa_0040_0000
	text := arm64Text(base, Arm64SVC0)
	stubs := Arm64SliceAlias{Base: base + 1<<20, Mem: make([]byte, 4*Arm64StubSlot)}
	pt := &Arm64Patcher{Text: text, Entry: 0x7000_0000_1000,
		Pools: []*Arm64Pool{{Base: stubs.Base, Size: uint64(len(stubs.Mem)), Alias: stubs}}}
	for i := 0; i < b.N; i++ {
		s, err := Arm64CheckSite(text.Mem, base, base+4, 63)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pt.Patch(s); err != nil {
			b.Fatal(err)
		}
		if n, err := pt.Unpatch(base, base+4); n != 1 || err != nil {
			b.Fatal(n, err)
		}
		pt.Reclaim()
	}
}

// TestArm64PatchConcurrent: threads trapping at the same and at different
// sites at once all get one patch per site, each site's B to its own stub.
func TestArm64PatchConcurrent(t *testing.T) {
	const base, n = 0x0000_aaaa_0040_0000, 64
	words := make([]uint32, n)
	for i := range words {
		words[i] = Arm64SVC0
	}
	text := arm64Text(base, words...)
	stubs := Arm64SliceAlias{Base: base + 1<<20, Mem: make([]byte, n*Arm64StubSlot)}
	pt := &Arm64Patcher{Text: text, Entry: 0x7000_0000_1000,
		Pools: []*Arm64Pool{{Base: stubs.Base, Size: uint64(len(stubs.Mem)), Alias: stubs}}}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func(g int) {
			var err error
			for i := 0; i < n && err == nil; i++ {
				site := base + uint64((i+g*7)%n)*4
				_, err = pt.Patch(Arm64Site{Addr: site, FixedNR: -1})
			}
			done <- err
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ps := pt.Patches()
	if len(ps) != n {
		t.Fatalf("%d patches, want %d", len(ps), n)
	}
	seen := map[uint64]bool{}
	for _, p := range ps {
		w, _ := text.Load32(p.Site)
		arm64CheckB(t, w, p.Site, p.Stub)
		if seen[p.Stub] {
			t.Fatalf("stub %#x shared", p.Stub)
		}
		seen[p.Stub] = true
	}
}

// TestArm64FileAlias: a pool written with pwrite through a file, as a
// memfd would be, and read back.
func TestArm64FileAlias(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "pool")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4 * Arm64StubSlot); err != nil {
		t.Fatal(err)
	}
	const base = 0x0000_aaaa_0050_0000
	pool := &Arm64Pool{Base: base, Size: 4 * Arm64StubSlot, Alias: Arm64FileAlias{Base: base, F: f}}
	text := arm64Text(0x0000_aaaa_0040_0000, 0xd503201f, Arm64SVC0)
	pt := &Arm64Patcher{Text: text, Pools: []*Arm64Pool{pool}, Entry: 0x7000_0000_1000}
	pa, err := pt.Patch(Arm64Site{Addr: text.Base + 4, FixedNR: -1})
	if err != nil {
		t.Fatal(err)
	}
	code, _ := Arm64StubCode(Arm64Stub{Site: pa.Site, Addr: pa.Stub, Entry: pt.Entry})
	for i, w := range code {
		got, err := pool.Alias.Load32(pa.Stub + uint64(i)*4)
		if err != nil || got != w {
			t.Fatalf("stub word %d: %08x, %v; want %08x", i, got, err, w)
		}
	}
	for _, addr := range []uint64{base - 4, base + 2} {
		if _, err := pool.Alias.Load32(addr); err == nil {
			t.Errorf("Load32(%#x) through the file: no error", addr)
		}
	}
	if _, err := pool.Alias.Load32(base + 1<<20); err == nil {
		t.Errorf("Load32 past the end of the file: no error")
	}
}
