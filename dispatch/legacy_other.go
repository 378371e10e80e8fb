//go:build !amd64

package dispatch

import "golang.org/x/sys/unix"

// legacyPureLookups: asm-generic architectures have no legacy path
// syscalls (see legacy_amd64.go).
var legacyPureLookups []int

// legacyOpens: none (see legacy_amd64.go).
var legacyOpens []int

// legacyAbsent: the asm-generic table's numbers that are no syscall of a
// 64-bit architecture (arch_specific_syscall, and the time64 variants of
// 32-bit ABIs, 403-423): the kernel answers ENOSYS.
var legacyAbsent = func() []absent {
	out := []absent{{244, unix.ENOSYS, "arch_specific_syscall: a placeholder, no syscall on arm64"}}
	for nr := 403; nr <= 423; nr++ {
		out = append(out, absent{nr, unix.ENOSYS, "a time64 variant of the 32-bit ABIs: no syscall on arm64"})
	}
	return out
}()
