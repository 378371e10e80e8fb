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

// processVM is process_vm_readv (write false) or process_vm_writev of one
// local and one remote range. It is a raw syscall: it does not block for
// long (at most a fault in of the guest's page), and skipping the
// scheduler's syscall bookkeeping saves ~0.1 µs per guest memory access.
func processVM(pid int, b []byte, addr uint64, write bool) (int, unix.Errno) {
	local := unix.Iovec{Base: &b[0], Len: uint64(len(b))}
	remote := unix.RemoteIovec{Base: uintptr(addr), Len: len(b)}
	nr := uintptr(unix.SYS_PROCESS_VM_READV)
	if write {
		nr = unix.SYS_PROCESS_VM_WRITEV
	}
	n, _, e := unix.RawSyscall6(nr, uintptr(pid), uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
