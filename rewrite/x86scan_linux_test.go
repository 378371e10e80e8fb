package rewrite

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkX86TextScanAlias: the scan of a text alias as the rewrite tier
// makes one (trap/rewrite.go: the host libc's .text copied into a memfd,
// mapped shared, untouched), reading its bytes through the fresh mapping
// ("view": a first touch of every page) or from the memfd ("file": pread
// into a buffer, X86Text.Src).
func BenchmarkX86TextScanAlias(b *testing.B) {
	addr, code := hostLibcText(b)
	for _, file := range []bool{false, true} {
		name := "view"
		if file {
			name = "file"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(code)))
			for b.Loop() {
				b.StopTimer()
				fd, err := unix.MemfdCreate("scan", unix.MFD_CLOEXEC)
				if err != nil {
					b.Fatal(err)
				}
				f := os.NewFile(uintptr(fd), "scan")
				if _, err := f.WriteAt(code, 0); err != nil {
					b.Fatal(err)
				}
				v, err := unix.Mmap(fd, 0, len(code), unix.PROT_READ, unix.MAP_SHARED)
				if err != nil {
					b.Fatal(err)
				}
				t := &X86Text{Base: addr, Code: v}
				if file {
					t.Src = f
				}
				b.StartTimer()
				t.Scan()
				b.StopTimer()
				unix.Munmap(v)
				f.Close()
				b.StartTimer()
			}
		})
	}
}
