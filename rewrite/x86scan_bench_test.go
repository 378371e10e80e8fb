package rewrite

import (
	"debug/elf"
	"testing"
)

// BenchmarkX86TextScan: the one-time scan of a text for rel32 branch
// targets (X86Text.scan), over the host's libc, which every dynamic
// program's first patch in the rewrite tier pays once per exec.
func BenchmarkX86TextScan(b *testing.B) {
	f, err := elf.Open("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		b.Skip("SKIP: no /lib/x86_64-linux-gnu/libc.so.6")
	}
	defer f.Close()
	sec := f.Section(".text")
	if sec == nil {
		b.Skip("SKIP: libc has no .text")
	}
	code, err := sec.Data()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(code)))
	for b.Loop() {
		t := &X86Text{Base: sec.Addr, Code: code}
		if t.rel32Into(0, 1) {
			b.Fatal("a target below 1")
		}
	}
}
