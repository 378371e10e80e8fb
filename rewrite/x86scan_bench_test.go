package rewrite

import (
	"debug/elf"
	"encoding/binary"
	"testing"
)

// BenchmarkX86TextScan: the one-time scan of a text for rel32 branch
// targets (X86Text.scan), over the host's libc, which every dynamic
// program's first patch in the rewrite tier pays once per exec.
func BenchmarkX86TextScan(b *testing.B) {
	addr, code := hostLibcText(b)
	b.SetBytes(int64(len(code)))
	for b.Loop() {
		t := &X86Text{Base: addr, Code: code}
		if t.rel32Into(0, 1) {
			b.Fatal("a target below 1")
		}
	}
}

// BenchmarkX86FindSite: the site checks (the sweeps, the branch checks)
// of every syscall instruction in the host's libc, its text scanned
// once, as a rewrite-tier run pays them at each hot site.
func BenchmarkX86FindSite(b *testing.B) {
	addr, code := hostLibcText(b)
	t := &X86Text{Base: addr, Code: code}
	t.Scan()
	type call struct {
		ip uint64
		nr uint32
	}
	var calls []call
	for i := 7; i+2 <= len(code); i++ {
		if code[i] == 0x0F && code[i+1] == 0x05 {
			nr := uint32(0)
			if code[i-5] == 0xB8 {
				nr = binary.LittleEndian.Uint32(code[i-4:])
			}
			calls = append(calls, call{addr + uint64(i) + 2, nr})
		}
	}
	ok := 0
	for b.Loop() {
		ok = 0
		for _, c := range calls {
			if _, err := X86FindSite(t, c.ip, c.nr, true); err == nil {
				ok++
			}
		}
	}
	b.ReportMetric(float64(len(calls)), "sites")
	b.ReportMetric(float64(ok), "accepted")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(calls)), "ns/site")
}

// hostLibcText returns the address and bytes of the host libc's .text,
// or skips.
func hostLibcText(b *testing.B) (uint64, []byte) {
	addr, code, ok := libcText()
	if !ok {
		b.Skip("SKIP: no readable .text in /lib/x86_64-linux-gnu/libc.so.6")
	}
	return addr, code
}

// libcText returns the address and bytes of the host libc's .text, if
// it has one.
func libcText() (uint64, []byte, bool) {
	f, err := elf.Open("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		return 0, nil, false
	}
	defer f.Close()
	sec := f.Section(".text")
	if sec == nil {
		return 0, nil, false
	}
	code, err := sec.Data()
	if err != nil {
		return 0, nil, false
	}
	return sec.Addr, code, true
}
