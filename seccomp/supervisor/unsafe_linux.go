package supervisor

// All uses of package unsafe in this package live in this file.

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// currentCPU is getcpu(2): the CPU the calling thread runs on.
func currentCPU() (int, bool) {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return 0, false
	}
	return int(cpu), true
}
