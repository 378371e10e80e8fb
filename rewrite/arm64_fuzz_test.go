package rewrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzArm64Site: any bytes, base, PC and number: the site check never
// panics, and what it accepts is an svc #0 at PC-4 inside the bytes.
func FuzzArm64Site(f *testing.F) {
	f.Add([]byte{0x1f, 0x20, 0x03, 0xd5, 0x01, 0x00, 0x00, 0xd4}, uint64(0x400000), uint64(0x400008), 63)
	f.Add([]byte{0xa8, 0x1b, 0x80, 0x52, 0x01, 0x00, 0x00, 0xd4}, uint64(0x400000), uint64(0x400008), 221)
	f.Add([]byte{0x01, 0x00, 0x00, 0xd4}, uint64(0xfffffffffffffffc), uint64(0), 0)
	f.Fuzz(func(t *testing.T, code []byte, base, pc uint64, nr int) {
		s, err := Arm64CheckSite(code, base, pc, nr)
		if err != nil {
			if !errors.Is(err, ErrArm64NotSite) {
				t.Fatalf("error %v does not wrap ErrArm64NotSite", err)
			}
			return
		}
		off := s.Addr - base
		if s.Addr != pc-4 || s.Addr < base || off+4 > uint64(len(code)) {
			t.Fatalf("site %#x outside code at %#x (%d bytes) for pc %#x", s.Addr, base, len(code), pc)
		}
		if binary.LittleEndian.Uint32(code[off:]) != Arm64SVC0 {
			t.Fatalf("site %#x is not svc #0", s.Addr)
		}
		if s.FixedNR != -1 && s.FixedNR != nr {
			t.Fatalf("fixed number %d for a trap of %d", s.FixedNR, nr)
		}
	})
}

// FuzzArm64Encode: any from and to: Arm64B never panics and every B it
// emits decodes (arm64asm) to a branch reaching to; a veneer and a stub
// for any addresses either fail cleanly or hold branches that all go
// back to the site.
func FuzzArm64Encode(f *testing.F) {
	f.Add(uint64(0x400000), uint64(0x400000+Arm64BRange-4), uint64(0x7f00_0000_0000))
	f.Add(uint64(0x400000), uint64(0x400000+Arm64BRange), uint64(0x1000))
	f.Add(uint64(0x8000000), uint64(0), uint64(0x10))
	f.Add(uint64(3), uint64(0xffff_ffff_ffff_fffc), uint64(8))
	f.Fuzz(func(t *testing.T, from, to, stub uint64) {
		w, err := Arm64B(from, to)
		aligned := from%4 == 0 && to%4 == 0
		switch {
		case err == nil:
			if !aligned || !Arm64BReaches(from, to) {
				t.Fatalf("B from %#x to %#x accepted", from, to)
			}
			arm64CheckB(t, w, from, to)
		case !errors.Is(err, ErrArm64Range) && !errors.Is(err, ErrArm64Align):
			t.Fatalf("unexpected error %v", err)
		case aligned && Arm64BReaches(from, to):
			t.Fatalf("B from %#x to %#x refused: %v", from, to, err)
		}
		// from as the site, to as the veneer, stub anywhere.
		site, v := from, to
		if ven, err := Arm64VeneerCode(site, v, stub); err == nil {
			arm64CheckB(t, ven[7], v+28, site+4)
			if lit := uint64(ven[5])<<32 | uint64(ven[4]); lit != stub+Arm64StubEntryFar {
				t.Fatalf("veneer literal %#x, want %#x", lit, stub+Arm64StubEntryFar)
			}
		}
		for _, ret := range []uint64{0, v + Arm64VeneerReturn} {
			code, err := Arm64StubCode(Arm64Stub{Site: site, Addr: stub, Entry: to | 1<<40, Return: ret})
			if err != nil {
				continue
			}
			lits := arm64Literals(t, code, stub)
			for i, w := range code {
				if lits[i] {
					continue
				}
				inst := arm64Decode(t, w)
				if at, ok := Arm64BTarget(stub+uint64(i)*4, w); ok && at != site+4 {
					t.Fatalf("stub word %d (%v): B to %#x, want %#x", i, inst, at, site+4)
				}
			}
		}
	})
}

// FuzzArm64Patch: any text and site: a patch never changes a byte of the
// text but the site's word, and the site's word is a B to its stub or
// veneer; Unpatch gives the text back byte for byte.
func FuzzArm64Patch(f *testing.F) {
	f.Add([]byte{0x1f, 0x20, 0x03, 0xd5, 0x01, 0x00, 0x00, 0xd4, 0x1f, 0x20, 0x03, 0xd5}, uint16(1), false)
	f.Add([]byte{0x01, 0x00, 0x00, 0xd4}, uint16(0), true)
	f.Add([]byte{0x01, 0x00, 0x00, 0xd4, 0x01, 0x00, 0x00, 0xd4}, uint16(9), false)
	f.Fuzz(func(t *testing.T, text []byte, word uint16, far bool) {
		const base = 0x0000_aaaa_0040_0000
		text = text[:len(text)&^3]
		site := base + uint64(word)*4
		p := arm64Placements[0]
		if far {
			p = arm64Placements[2]
		}
		mem := append([]byte(nil), text...)
		ta := Arm64SliceAlias{Base: base, Mem: mem}
		stubs := Arm64SliceAlias{Base: p.stub, Mem: make([]byte, 2*Arm64StubSlot)}
		pools := []*Arm64Pool{{Base: p.stub, Size: uint64(len(stubs.Mem)), Alias: stubs}}
		if far {
			ven := Arm64SliceAlias{Base: p.veneer, Mem: make([]byte, 2*Arm64VeneerSize)}
			pools = append(pools, &Arm64Pool{Base: p.veneer, Size: uint64(len(ven.Mem)), Alias: ven})
		}
		pt := &Arm64Patcher{Text: ta, Pools: pools, Entry: p.entry}
		pa, err := pt.Patch(Arm64Site{Addr: site, FixedNR: -1})
		if err != nil {
			if !bytes.Equal(mem, text) {
				t.Fatalf("a refused patch (%v) changed the text", err)
			}
			return
		}
		off := int(site - base)
		if binary.LittleEndian.Uint32(text[off:]) != Arm64SVC0 {
			t.Fatalf("patched %08x, not svc", binary.LittleEndian.Uint32(text[off:]))
		}
		if !bytes.Equal(mem[:off], text[:off]) || !bytes.Equal(mem[off+4:], text[off+4:]) {
			t.Fatal("the patch changed the text around the site")
		}
		target := pa.Stub
		if pa.Veneer != 0 {
			target = pa.Veneer
		}
		arm64CheckB(t, binary.LittleEndian.Uint32(mem[off:]), site, target)
		if n, err := pt.Unpatch(base, base+uint64(len(mem))); n != 1 || err != nil {
			t.Fatalf("Unpatch: %d, %v", n, err)
		}
		if !bytes.Equal(mem, text) {
			t.Fatal("Unpatch did not give the text back")
		}
	})
}
