package rewrite

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"runtime"
	"sync"
)

// The scan of a text for its rel32 branch targets (X86Text.Scan).

func (t *X86Text) scan() {
	n := len(t.Code)
	t.targets = make([]uint64, (n+63)/64)
	parts := min(runtime.GOMAXPROCS(0), runtime.NumCPU(), n/scanPart)
	if parts <= 1 {
		t.scanRange(0, n, t.targets)
		return
	}
	// A libc's text takes the first patch of each dynamic program about
	// 0.4 ms on one CPU, while the guest thread waits: the parts go to
	// the other CPUs. Their targets may fall in any part's words: each
	// part marks a bitmap of its own, merged at the end (an atomic OR a
	// target cost as much as the rest of its work).
	step := (n + parts - 1) / parts
	var wg sync.WaitGroup
	own := make([][]uint64, parts)
	for p := 1; p < parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own[p] = make([]uint64, len(t.targets))
			t.scanRange(p*step, min((p+1)*step, n), own[p])
		}()
	}
	t.scanRange(0, step, t.targets)
	wg.Wait()
	for _, m := range own[1:] {
		for i, w := range m {
			t.targets[i] |= w
		}
	}
}

// scanPart is the least text a part of a parallel scan gets.
const scanPart = 256 << 10

// scanRange marks in into the targets of the rel32 branches whose opcode
// lies at an offset in [lo, hi) (their operands may lie beyond hi). Only
// a target in the text is marked: only it can be a site's middle.
//
// With Src it reads the text from Src, scanChunk bytes at a time, into a
// buffer of its own: the bytes of Code, without a first touch of each of
// its pages. A read that fails is scanned from Code.
func (t *X86Text) scanRange(lo, hi int, into []uint64) {
	n := len(t.Code)
	if t.Src == nil {
		scanBytes(t.Code, 0, n, lo, hi, into)
		return
	}
	// A chunk's last opcode needs up to 5 bytes after the chunk (0F 8x at
	// its last byte).
	buf := make([]byte, scanChunk+5)
	for at := lo; at < hi; {
		e := min(at+scanChunk, hi)
		c := buf[:min(e+5, n)-at]
		if k, _ := t.Src.ReadAt(c, int64(at)); k != len(c) {
			c = t.Code[at : at+len(c)]
		}
		scanBytes(c, at, n, at, e, into)
		at = e
	}
}

// scanChunk is how much of Src scanRange reads at a time.
const scanChunk = 64 << 10

// scanBytes is scanRange over c, the text's bytes from offset at on, of a
// text of n bytes: lo and hi are offsets in the text, and c holds at
// least the bytes an opcode in [lo, hi) needs, or the text's end.
func scanBytes(c []byte, at, n, lo, hi int, into []uint64) {
	mark := func(to int64) {
		if to > 0 && to < int64(n) {
			into[to>>6] |= 1 << (to & 63)
		}
	}
	top := at + len(c)    // the end of the bytes in c, in the text
	end := min(hi, top-4) // an opcode at i needs its 4 bytes after it
	// With AVX2, 32 bytes at a time give a mask of the three opcodes'
	// places (rel32Masks), which then cost a bit each: a libc's text in
	// about a third of the byte search's time, which pays a call per 0F.
	if haveRel32Masks {
		var masks [128]uint32
		for {
			// Whole blocks below end, with the byte after them in c.
			nb := min((end-lo)/32, (top-1-lo)/32, len(masks))
			if nb <= 0 {
				break
			}
			rel32Masks(&c[lo-at], nb, &masks[0])
			for k, m := range masks[:nb] {
				for m != 0 {
					i := lo + 32*k + bits.TrailingZeros32(m)
					m &= m - 1
					// E8 and E9 take a rel32 right after them, 0F 80-8F
					// one after the second byte: j is 1 for 0F (bit 1 is
					// set in 0F, clear in E8 and E9), without a branch.
					j := int(c[i-at]>>1) & 1
					if i+5+j > top {
						continue
					}
					to := int64(i+5+j) + int64(int32(binary.LittleEndian.Uint32(c[i-at+1+j:i-at+5+j])))
					if uint64(to-1) < uint64(n-1) { // 0 < to < n
						into[to>>6] |= 1 << (to & 63)
					}
				}
			}
			lo += 32 * nb
		}
	}
	// The rest, or all without AVX2: the opcodes are found with IndexByte
	// (vectorised), each in its own pass.
	for _, op := range [...]byte{0xE8, 0xE9, 0x0F} {
		for i := lo; i < end; i++ {
			k := bytes.IndexByte(c[i-at:end-at], op)
			if k < 0 {
				break
			}
			i += k
			if op != 0x0F {
				mark(int64(i+5) + int64(int32(binary.LittleEndian.Uint32(c[i-at+1:i-at+5]))))
			} else if i+6 <= top && c[i-at+1]&0xF0 == 0x80 {
				mark(int64(i+6) + int64(int32(binary.LittleEndian.Uint32(c[i-at+2:i-at+6]))))
			}
		}
	}
}
