package rewrite

import (
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// checkFastLen fails unless fastLen, where it claims b's first
// instruction, agrees with x86asm (decode): its length, whether it is a
// direct branch and where to; and it claims no cut-short copy of it.
func checkFastLen(t *testing.T, b []byte) bool {
	t.Helper()
	n, br, rel, ok := fastLen(b)
	if !ok {
		return true
	}
	inst, err := decode(b)
	tgt, isBr := directTarget(inst, 0)
	switch {
	case err != nil:
		t.Errorf("% x: fastLen %d, x86asm: %v", b[:min(len(b), 16)], n, err)
	case inst.Len != n:
		t.Errorf("% x: fastLen %d, x86asm %d (%v)", b[:min(len(b), 16)], n, inst.Len, inst)
	case isBr != br || br && int64(tgt) != int64(n)+rel:
		t.Errorf("% x: fastLen branch %v to %d, x86asm %v to %d (%v)", b[:min(len(b), 16)], br, int64(n)+rel, isBr, int64(tgt), inst)
	default:
		for k := range n {
			if _, _, _, ok := fastLen(b[:k]); ok {
				t.Errorf("% x: fastLen claims %d bytes of an instruction of %d", b[:k], k, n)
				break
			}
		}
		return true
	}
	return false
}

// TestX86FastLen: every opcode fastLen knows, one-byte and after 0F,
// with no prefix, 66, each REX and both, every ModRM, and SIB bytes of
// every base, against x86asm. The bytes after those are random.
func TestX86FastLen(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	prefixes := [][]byte{nil, {0x66}}
	for rex := byte(0x40); rex <= 0x4F; rex++ {
		prefixes = append(prefixes, []byte{rex}, []byte{0x66, rex})
	}
	tail := func(b []byte) []byte {
		for len(b) < 20 {
			b = append(b, byte(r.Uint32()))
		}
		return b
	}
	claimed := 0
	for _, two := range []bool{false, true} {
		for op := range 256 {
			failed := false
			for _, p := range prefixes {
				head := append(append([]byte(nil), p...), byte(op))
				if two {
					head = append(append([]byte(nil), p...), 0x0F, byte(op))
				}
				for m := 0; m < 256 && !failed; m++ {
					b := tail(append(append([]byte(nil), head...), byte(m)))
					if _, _, _, ok := fastLen(b); !ok {
						continue
					}
					claimed++
					failed = !checkFastLen(t, b)
					if m>>6 != 3 && m&7 == 4 { // a SIB byte: every base, some index and scale
						for sib := 0; sib < 256 && !failed; sib += 29 {
							failed = !checkFastLen(t, tail(append(append([]byte(nil), head...), byte(m), byte(sib))))
						}
						for base := range 8 {
							failed = failed || !checkFastLen(t, tail(append(append([]byte(nil), head...), byte(m), byte(base|r.IntN(32)<<3))))
						}
					}
				}
			}
			if failed {
				t.Logf("opcode %s%02x disagrees with x86asm", map[bool]string{true: "0F "}[two], op)
			}
		}
	}
	if claimed == 0 {
		t.Fatal("fastLen claims nothing")
	}
	t.Logf("%d cases claimed", claimed)
}

// FuzzX86FastLen: any bytes fastLen claims, against x86asm.
func FuzzX86FastLen(f *testing.F) {
	for _, s := range []string{"4889c7", "e800000000", "0f8410000000", "660f6f0424", "48b80102030405060708", "f7c101000000", "66c704240100"} {
		b, err := hex.DecodeString(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFastLen(t, b) })
}
