//go:build linux

package seccomp

import (
	"fmt"
	"runtime"

	elarch "github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// Arch describes one syscall ABI the filter can be built for. Syscall
// name→number tables come from github.com/elastic/go-seccomp-bpf/arch, which
// are generated from the kernel headers and available on every host, so a
// filter for either architecture can be built and simulated anywhere.
type Arch struct {
	Name      string
	AuditArch uint32
	// X32Bit is non-zero on x86_64: syscall numbers with this bit set belong
	// to the x32 ABI, which the filter refuses with ENOSYS.
	X32Bit uint32
	// Syscalls maps syscall names to numbers for this ABI. Do not modify.
	Syscalls map[string]int
}

// The architectures kbox supports.
var (
	ArchX86_64 = &Arch{
		Name:      "x86_64",
		AuditArch: unix.AUDIT_ARCH_X86_64,
		X32Bit:    0x40000000,
		Syscalls:  elarch.X86_64.SyscallNames,
	}
	ArchAArch64 = &Arch{
		Name:      "aarch64",
		AuditArch: unix.AUDIT_ARCH_AARCH64,
		Syscalls:  elarch.AARCH64.SyscallNames,
	}
)

// NativeArch returns the Arch of the running binary, or nil if kbox does not
// support it.
func NativeArch() *Arch {
	switch runtime.GOARCH {
	case "amd64":
		return ArchX86_64
	case "arm64":
		return ArchAArch64
	}
	return nil
}

// tableNames maps kernel syscall names to the names go-seccomp-bpf's
// generated tables use for them, where they differ (its aarch64 table
// names 64-bit newfstatat after the generic header's fstatat).
var tableNames = map[string]string{"newfstatat": "fstatat"}

// Nr returns the number of syscall name on a, and whether it exists there.
func (a *Arch) Nr(name string) (uint32, bool) {
	n, ok := a.Syscalls[name]
	if !ok && tableNames[name] != "" {
		n, ok = a.Syscalls[tableNames[name]]
	}
	return uint32(n), ok
}

// Names returns the kernel's name of each syscall number of a.
func (a *Arch) Names() map[int]string {
	m := make(map[int]string, len(a.Syscalls))
	for name, nr := range a.Syscalls {
		m[nr] = name
	}
	for kernel, table := range tableNames {
		if nr, ok := a.Syscalls[table]; ok {
			if _, clash := a.Syscalls[kernel]; !clash {
				m[nr] = kernel
			}
		}
	}
	return m
}

// knownName reports whether name is a syscall on any supported arch.
func knownName(name string) bool {
	_, a := ArchX86_64.Nr(name)
	_, b := ArchAArch64.Nr(name)
	return a || b
}

// Terminal ioctls refused by the ioctl guard.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// fcntl commands that make a new fd at or above their argument (the same
// numbers on every architecture): with a minimum at or above the virtual
// fd base, the new fd is virtual, so the fcntl guard notifies them.
const (
	fcntlDupfd        = unix.F_DUPFD
	fcntlDupfdCloexec = unix.F_DUPFD_CLOEXEC
)

func checkNames(list string, names []string) error {
	for _, n := range names {
		if !knownName(n) {
			return fmt.Errorf("seccomp: %s: unknown syscall %q", list, n)
		}
	}
	return nil
}
