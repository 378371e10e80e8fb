package rewrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// naiveTargets is the scan's definition, a byte at a time: every E8 or
// E9 at i < n-4 targets i+5+rel32, every 0F 80-8F at i < n-5 targets
// i+6+rel32, and only targets inside the text count.
func naiveTargets(c []byte) []uint64 {
	n := len(c)
	m := make([]uint64, (n+63)/64)
	mark := func(to int64) {
		if to > 0 && to < int64(n) {
			m[to>>6] |= 1 << (to & 63)
		}
	}
	for i := 0; i+4 < n; i++ {
		switch {
		case c[i] == 0xE8 || c[i] == 0xE9:
			mark(int64(i+5) + int64(int32(binary.LittleEndian.Uint32(c[i+1:]))))
		case c[i] == 0x0F && i+6 <= n && c[i+1]&0xF0 == 0x80:
			mark(int64(i+6) + int64(int32(binary.LittleEndian.Uint32(c[i+2:]))))
		}
	}
	return m
}

// scanBoth scans c with the vector scan (where the CPU has it) and with
// the byte search, each from Code alone and from a Src (which reads
// whole, fails, or reads short every other time: Code is scanned then),
// and fails unless every scan gives naiveTargets.
func scanBoth(t *testing.T, c []byte) {
	t.Helper()
	want := naiveTargets(c)
	saved := haveRel32Masks
	defer func() { haveRel32Masks = saved }()
	srcs := []struct {
		name string
		src  io.ReaderAt
	}{{"none", nil}, {"file", bytes.NewReader(c)}, {"failing", failingReader{}}, {"short", &shortReader{r: bytes.NewReader(c)}}}
	for _, vec := range []bool{false, true} {
		if vec && !saved {
			continue
		}
		haveRel32Masks = vec
		for _, s := range srcs {
			x := &X86Text{Code: c, Src: s.src}
			x.Scan()
			for w := range want {
				if x.targets[w] != want[w] {
					t.Fatalf("len %d, vector %v, source %s: word %d is %#x, want %#x", len(c), vec, s.name, w, x.targets[w], want[w])
				}
			}
		}
	}
}

type failingReader struct{}

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, errors.New("no") }

// shortReader reads one byte short of what is asked every other call.
type shortReader struct {
	r *bytes.Reader
	n atomic.Int64
}

func (s *shortReader) ReadAt(b []byte, off int64) (int, error) {
	if s.n.Add(1)%2 == 0 && len(b) > 0 {
		k, _ := s.r.ReadAt(b[:len(b)-1], off)
		return k, io.ErrUnexpectedEOF
	}
	return s.r.ReadAt(b, off)
}

// randomText is n bytes dense in the three opcodes, with short operands
// so that many targets land inside the text.
func randomText(r *rand.Rand, n int) []byte {
	c := make([]byte, n)
	for i := range c {
		switch r.IntN(8) {
		case 0:
			c[i] = 0xE8
		case 1:
			c[i] = 0xE9
		case 2:
			c[i] = 0x0F
		case 3:
			c[i] = 0x80 | byte(r.IntN(16))
		case 4:
			c[i] = 0xFF // a negative operand's high bytes
		case 5:
			c[i] = 0
		default:
			c[i] = byte(r.Uint32())
		}
	}
	return c
}

// TestX86Scan: the vector scan (rel32Masks) and the byte search find the same rel32
// targets as the definition: every length around the 32-byte blocks and
// the text's end, opcodes in the last bytes, a text big enough to be
// scanned in parts, and the host's libc.
func TestX86Scan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		for range 4 {
			scanBoth(t, randomText(r, n))
		}
	}
	for _, tail := range [][]byte{{0xE8}, {0xE9, 0, 0, 0}, {0x0F, 0x85, 1, 0, 0}, {0x0F, 0x85, 0xF0, 0xFF, 0xFF, 0xFF}, {0xE8, 0xF0, 0xFF, 0xFF, 0xFF}} {
		for n := 60; n < 100; n++ {
			c := append(make([]byte, n), tail...)
			scanBoth(t, c)
		}
	}
	scanBoth(t, randomText(r, 3*scanPart+77))
	// Texts scanned in parts (as many as CPUs, scanPart or more each): a
	// branch of each form whose opcode lies at every offset around the
	// middle, where two parts meet, its operand or target across it.
	for _, n := range []int{2 * scanPart, 2*scanPart + 5} {
		for at := n/2 - 8; at < n/2+8; at++ {
			for _, op := range [][]byte{{0xE8}, {0xE9}, {0x0F, 0x84}} {
				c := bytes.Repeat([]byte{0x90}, n)
				copy(c[at:], op)
				binary.LittleEndian.PutUint32(c[at+len(op):], uint32(int32(-3-at%5)))
				scanBoth(t, c)
			}
		}
	}
	// Read from a Src scanChunk bytes at a time: a branch of each form
	// whose opcode lies at every offset around where two chunks meet,
	// its operand or target across it.
	for _, n := range []int{3*scanChunk + 10, 2*scanChunk + 3} {
		for _, mid := range []int{scanChunk, 2 * scanChunk} {
			for at := mid - 8; at < mid+8 && at+6 <= n; at++ {
				for _, op := range [][]byte{{0xE8}, {0xE9}, {0x0F, 0x84}} {
					c := bytes.Repeat([]byte{0x90}, n)
					copy(c[at:], op)
					binary.LittleEndian.PutUint32(c[at+len(op):], uint32(int32(-3-at%5)))
					scanBoth(t, c)
				}
			}
		}
	}
	if _, code, ok := libcText(); ok {
		scanBoth(t, code)
	}
}

// FuzzX86Scan: any bytes, both scans against the definition.
func FuzzX86Scan(f *testing.F) {
	f.Add([]byte{0x0F, 0x84, 0x10, 0, 0, 0, 0xE8, 0xF0, 0xFF, 0xFF, 0xFF})
	f.Add(randomText(rand.New(rand.NewPCG(3, 4)), 200))
	f.Fuzz(func(t *testing.T, c []byte) { scanBoth(t, c) })
}
