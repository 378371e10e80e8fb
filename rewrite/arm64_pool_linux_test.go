package rewrite

import (
	"encoding/binary"
	"os"
	"testing"
)

// TestArm64MapPoolNear maps a stand-in for guest text (a pool itself: an
// executable memfd mapping with a writable alias), a pool near it, and
// patches a site of the text into a stub in that pool: real mappings,
// real placement, nothing executed.
func TestArm64MapPoolNear(t *testing.T) {
	text, err := Arm64MapPool(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close()
	lo, hi := text.Base, text.Base+text.Size
	pool, err := Arm64MapPoolNear(lo, hi, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, s := range []uint64{lo, hi - 4} {
		if !arm64Near(s, pool.Base, pool.Size) {
			t.Fatalf("pool [%#x, +%#x) not in reach of the site %#x", pool.Base, pool.Size, s)
		}
	}
	site := lo + 0x100
	if err := text.Alias.Store32(site, Arm64SVC0); err != nil {
		t.Fatal(err)
	}
	pt := &Arm64Patcher{Text: text.Alias, Pools: []*Arm64Pool{pool.Arm64Pool}, Entry: 0x7000_0000_1000}
	pa, err := pt.Patch(Arm64Site{Addr: site, FixedNR: -1})
	if err != nil {
		t.Fatal(err)
	}
	if pa.Veneer != 0 || pa.Stub < pool.Base || pa.Stub >= pool.Base+pool.Size {
		t.Fatalf("patch %+v: want a direct stub in the pool at %#x", pa, pool.Base)
	}
	w, _ := text.Alias.Load32(site)
	arm64CheckB(t, w, site, pa.Stub)
	if os.Getenv("KBOX_EMULATED") != "" {
		return // qemu-user's /proc/self/mem is the emulator's
	}
	// The executable mapping shows what went through the alias.
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skip(err)
	}
	defer mem.Close()
	var b [4]byte
	if _, err := mem.ReadAt(b[:], int64(site)); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(b[:]); got != w {
		t.Fatalf("run mapping holds %08x at the site, alias %08x", got, w)
	}
	code, _ := Arm64StubCode(Arm64Stub{Site: site, Addr: pa.Stub, Entry: pt.Entry})
	if _, err := mem.ReadAt(b[:], int64(pa.Stub)); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(b[:]); got != code[0] {
		t.Fatalf("stub's first word %08x, want %08x", got, code[0])
	}
}

func TestArm64MapPoolNearRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		lo, hi uint64
	}{
		{"empty text", 0x40_0000, 0x40_0000},
		{"text larger than the reach", 0x1000_0000, 0x1000_0000 + Arm64BRange},
		{"misaligned", 0x40_0002, 0x41_0000},
	} {
		if p, err := Arm64MapPoolNear(c.lo, c.hi, 1<<16); err == nil {
			p.Close()
			t.Errorf("%s: mapped a pool at %#x", c.name, p.Base)
		}
	}
}
