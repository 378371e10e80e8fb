package shadowfd

import "unsafe"

// ptr passes a buffer to LKL by address.
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
